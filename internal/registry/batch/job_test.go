package batch

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/apis"
	"github.com/svcnet/svcnet/internal/registry"

	. "github.com/svcnet/svcnet/internal/registry/registrytest"
)

func job(mutate func(*batchv1.Job)) *batchv1.Job {
	return Mutated(&batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "default"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "pi", Image: "perl:5.34"}},
		}}},
	}, mutate)
}

// create runs a create up to storage: decoding defaults, system metadata
// (the UID the generated selector uses), PrepareForCreate and Validate.
func create(j *batchv1.Job) error {
	apis.Scheme.Default(j)
	rest.FillObjectMetaSystemFields(j)
	return rest.BeforeCreate(registry.NewStrategy(Job), InNamespace("default"), j)
}

// prepared returns j as PrepareForCreate leaves it, and its errors.
func prepared(j *batchv1.Job) field.ErrorList {
	apis.Scheme.Default(j)
	rest.FillObjectMetaSystemFields(j)
	s := registry.NewStrategy(Job)
	s.PrepareForCreate(InNamespace("default"), j)
	return s.Validate(InNamespace("default"), j)
}

func TestJobPrepareForCreate(t *testing.T) {
	t.Run("generated selector", func(t *testing.T) {
		j := job(func(j *batchv1.Job) {
			j.Spec.Template.Labels = map[string]string{"app": "pi"}
			j.Status.Succeeded = 3
			j.Generation = 9
		})
		if err := create(j); err != nil {
			t.Fatal(err)
		}
		uid := string(j.UID)
		want := map[string]string{"app": "pi", ControllerUIDLabel: uid, "controller-uid": uid, JobNameLabel: "pi", "job-name": "pi"}
		if len(j.Spec.Template.Labels) != len(want) {
			t.Errorf("template labels %v, want %v", j.Spec.Template.Labels, want)
		}
		for k, v := range want {
			if j.Spec.Template.Labels[k] != v {
				t.Errorf("template label %s=%q, want %q", k, j.Spec.Template.Labels[k], v)
			}
		}
		sel := j.Spec.Selector
		if sel == nil || len(sel.MatchLabels) != 1 || sel.MatchLabels[ControllerUIDLabel] != uid || len(sel.MatchExpressions) > 0 {
			t.Errorf("selector %v, want %s=%s", sel, ControllerUIDLabel, uid)
		}
		if j.Status.Succeeded != 0 || j.Generation != 1 {
			t.Errorf("status %+v and generation %d after create", j.Status, j.Generation)
		}
	})
	t.Run("manual selector", func(t *testing.T) {
		j := job(func(j *batchv1.Job) {
			j.Spec.ManualSelector = ptr.To(true)
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pi"}}
			j.Spec.Template.Labels = map[string]string{"app": "pi"}
		})
		if err := create(j); err != nil {
			t.Fatal(err)
		}
		if len(j.Spec.Template.Labels) != 1 || len(j.Spec.Selector.MatchLabels) != 1 {
			t.Errorf("manual selector changed: labels %v, selector %v", j.Spec.Template.Labels, j.Spec.Selector)
		}
	})
}

func TestJobValidate(t *testing.T) {
	manual := func(sel map[string]string, labels map[string]string) func(*batchv1.Job) {
		return func(j *batchv1.Job) {
			j.Spec.ManualSelector = ptr.To(true)
			if sel != nil {
				j.Spec.Selector = &metav1.LabelSelector{MatchLabels: sel}
			}
			j.Spec.Template.Labels = labels
		}
	}
	cases := []struct {
		name   string
		mutate func(*batchv1.Job)
		want   []string
	}{
		{"defaulted job", nil, nil},
		{"restart on failure", func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure }, nil},
		{"pods that always restart", func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = "" },
			[]string{Unsup("spec.template.spec.restartPolicy")}},
		{"negative parallelism", func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](-1) }, []string{Inv("spec.parallelism")}},
		{"zero parallelism (a paused job)", func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](0) }, nil},
		{"negative completions", func(j *batchv1.Job) { j.Spec.Completions = ptr.To[int32](-1) }, []string{Inv("spec.completions")}},
		{"negative backoff limit", func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To[int32](-1) }, []string{Inv("spec.backoffLimit")}},
		{"negative active deadline", func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr.To[int64](-1) },
			[]string{Inv("spec.activeDeadlineSeconds")}},
		{"active deadline", func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr.To[int64](100) }, nil},
		{"deleted at once when finished", func(j *batchv1.Job) { j.Spec.TTLSecondsAfterFinished = ptr.To[int32](0) }, nil},
		{"negative ttl", func(j *batchv1.Job) { j.Spec.TTLSecondsAfterFinished = ptr.To[int32](-1) },
			[]string{Inv("spec.ttlSecondsAfterFinished")}},
		{"unknown completion mode", func(j *batchv1.Job) { j.Spec.CompletionMode = ptr.To[batchv1.CompletionMode]("Sometimes") },
			[]string{Unsup("spec.completionMode")}},
		{"indexed", func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			j.Spec.Completions = ptr.To[int32](5)
		}, nil},
		{"indexed without completions", func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			j.Spec.Parallelism = ptr.To[int32](2)
		}, []string{Req("spec.completions")}},
		{"pod failure policy", func(j *batchv1.Job) { j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{} }, []string{Forbid("spec")}},
		{"backoff limit per index", func(j *batchv1.Job) { j.Spec.BackoffLimitPerIndex = ptr.To[int32](1) }, []string{Forbid("spec")}},
		{"manual selector", manual(map[string]string{"app": "pi"}, map[string]string{"app": "pi"}), nil},
		{"manual selector without a selector", manual(nil, nil), []string{Req("spec.selector")}},
		{"manual selector that does not match", manual(map[string]string{"app": "pi"}, map[string]string{"app": "e"}),
			[]string{Inv("spec.template.metadata.labels")}},
		{"manual selector that is invalid", manual(map[string]string{"app": "p i"}, map[string]string{"app": "pi"}),
			[]string{Inv("spec.selector.matchLabels")}},
		{"no image", func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "" },
			[]string{Req("spec.template.spec.containers[0].image")}},
		{"bad name", func(j *batchv1.Job) { j.Name = "Pi" }, []string{Inv("metadata.name")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			CheckErrors(t, prepared(job(tc.mutate)), tc.want...)
		})
	}
}

func TestJobValidateUpdate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*batchv1.Job)
		want   []string
	}{
		{"parallelism", func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](4) }, nil},
		{"suspend", func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }, nil},
		{"active deadline", func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) }, nil},
		{"ttl", func(j *batchv1.Job) { j.Spec.TTLSecondsAfterFinished = ptr.To[int32](100) }, nil},
		{"labels", func(j *batchv1.Job) { j.Labels = map[string]string{"team": "a"} }, nil},
		{"completions", func(j *batchv1.Job) { j.Spec.Completions = ptr.To[int32](2) }, []string{Inv("spec.completions")}},
		{"image", func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "perl:5.40" }, []string{Inv("spec.template")}},
		{"completion mode", func(j *batchv1.Job) { j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion) },
			[]string{Inv("spec.completionMode")}},
		{"selector", func(j *batchv1.Job) {
			j.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: JobNameLabel, Operator: metav1.LabelSelectorOpExists}}
		}, []string{Inv("spec.selector")}},
		{"the updated job is validated too", func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](-1) },
			[]string{Inv("spec.parallelism")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := job(nil)
			if err := create(old); err != nil {
				t.Fatal(err)
			}
			obj := old.DeepCopy()
			tc.mutate(obj)
			s := registry.NewStrategy(Job)
			s.PrepareForUpdate(InNamespace("default"), obj, old)
			CheckErrors(t, s.ValidateUpdate(InNamespace("default"), obj, old), tc.want...)
		})
	}
}

func TestJobUpdateGenerationAndStatus(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*batchv1.Job)
		status  bool // through the status subresource
		wantGen int64
		wantPar int32
		wantAct int32 // status.active after the update
	}{
		{"spec", func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) }, false, 2, 3, 1},
		{"status on the main resource", func(j *batchv1.Job) { j.Status.Active = 5 }, false, 1, 1, 1},
		{"status subresource", func(j *batchv1.Job) { j.Status.Active = 5 }, true, 1, 1, 5},
		{"spec through the status subresource", func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) }, true, 1, 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := job(nil)
			if err := create(old); err != nil {
				t.Fatal(err)
			}
			old.ResourceVersion, old.Status.Active = "5", 1
			obj := old.DeepCopy()
			tc.mutate(obj)
			Update(t, InNamespace("default"), Job, tc.status, obj, old)
			if obj.Generation != tc.wantGen || *obj.Spec.Parallelism != tc.wantPar || obj.Status.Active != tc.wantAct {
				t.Errorf("generation %d, parallelism %d, active %d; want %d, %d, %d",
					obj.Generation, *obj.Spec.Parallelism, obj.Status.Active, tc.wantGen, tc.wantPar, tc.wantAct)
			}
		})
	}
}

func TestJobTable(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	cond := func(typ batchv1.JobConditionType, s corev1.ConditionStatus) []batchv1.JobCondition {
		return []batchv1.JobCondition{{Type: typ, Status: s}}
	}
	cases := []struct {
		name   string
		mutate func(*batchv1.Job)
		want   []any // status, completions, duration
	}{
		{"not started", func(j *batchv1.Job) { j.Spec.Completions = ptr.To[int32](1) }, []any{"Running", "0/1", ""}},
		{"running", func(j *batchv1.Job) {
			j.Spec.Completions = ptr.To[int32](3)
			j.Status = batchv1.JobStatus{Succeeded: 1, StartTime: at(-20*time.Minute - 30*time.Second)}
		}, []any{"Running", "1/3", "20m"}},
		{"complete", func(j *batchv1.Job) {
			j.Spec.Completions = ptr.To[int32](1)
			j.Status = batchv1.JobStatus{Succeeded: 1, StartTime: at(-time.Hour), CompletionTime: at(-time.Hour + 90*time.Second),
				Conditions: cond(batchv1.JobComplete, corev1.ConditionTrue)}
		}, []any{"Complete", "1/1", "90s"}},
		{"failed", func(j *batchv1.Job) {
			j.Spec.Completions = ptr.To[int32](2)
			j.Status.Conditions = append(cond(batchv1.JobFailureTarget, corev1.ConditionTrue), cond(batchv1.JobFailed, corev1.ConditionTrue)...)
		}, []any{"Failed", "0/2", ""}},
		{"suspended", func(j *batchv1.Job) {
			j.Spec.Completions = ptr.To[int32](2)
			j.Status.Conditions = cond(batchv1.JobSuspended, corev1.ConditionTrue)
		}, []any{"Suspended", "0/2", ""}},
		{"resumed", func(j *batchv1.Job) {
			j.Spec.Completions = ptr.To[int32](2)
			j.Status.Conditions = cond(batchv1.JobSuspended, corev1.ConditionFalse)
		}, []any{"Running", "0/2", ""}},
		{"work queue", func(j *batchv1.Job) {
			j.Spec.Parallelism = ptr.To[int32](3)
			j.Status.Succeeded = 1
		}, []any{"Running", "1/1 of 3", ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := job(tc.mutate)
			j.CreationTimestamp = metav1.NewTime(now.Add(-48*time.Hour - time.Second))
			cols, row := TableOf(t, Job, j)
			CheckRow(t, cols, row, []string{"Name", "Status", "Completions", "Duration", "Age"},
				append(append([]any{"pi"}, tc.want...), "2d"))
		})
	}
}
