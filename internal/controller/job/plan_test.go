package job

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var t0 = time.Unix(1_800_000_000, 0)

func newJob(completions *int32, parallelism int32, mode batchv1.CompletionMode) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "ns", UID: "job-uid"},
		Spec: batchv1.JobSpec{Completions: completions, Parallelism: ptr.To(parallelism), BackoffLimit: ptr.To[int32](2),
			CompletionMode: ptr.To(mode),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job-name": "pi"}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "host"}}}}},
	}
}

// podsOf makes pods from states: A active, S succeeded, F failed; an
// index per pod in Indexed mode (its position).
func podsOf(j *batchv1.Job, states string) []*corev1.Pod {
	var out []*corev1.Pod
	indexed := *j.Spec.CompletionMode == batchv1.IndexedCompletion
	for i, st := range states {
		idx := -1
		if indexed {
			idx = i
		}
		p := NewPod(j, idx)
		p.Name = p.GenerateName + string(rune('a'+i))
		p.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(i) * time.Second))
		switch st {
		case 'A':
			p.Status.Phase = corev1.PodRunning
		case 'S':
			p.Status.Phase = corev1.PodSucceeded
		case 'F':
			p.Status.Phase = corev1.PodFailed
		case '-':
			continue // no pod at this index
		}
		out = append(out, p)
	}
	return out
}

func cond(s batchv1.JobStatus) string {
	var out []string
	for _, c := range s.Conditions {
		if c.Status == corev1.ConditionTrue {
			out = append(out, string(c.Type)+"/"+c.Reason)
		}
	}
	return strings.Join(out, ",")
}

func TestPlan(t *testing.T) {
	nonIndexed, indexed := batchv1.NonIndexedCompletion, batchv1.IndexedCompletion
	three := ptr.To[int32](3)
	for _, tc := range []struct {
		name           string
		job            *batchv1.Job
		states         string
		create, delete int
		conditions     string
		indexes        string
	}{
		{"starts up to parallelism", newJob(three, 2, nonIndexed), "", 2, 0, "", ""},
		{"keeps parallelism while completions remain", newJob(three, 2, nonIndexed), "SA", 1, 0, "", ""},
		{"no more than the completions left", newJob(three, 2, nonIndexed), "SSA", 0, 0, "", ""},
		{"complete", newJob(three, 2, nonIndexed), "SSS", 0, 0, "SuccessCriteriaMet/CompletionsReached,Complete/CompletionsReached", ""},
		{"failures retried within the backoff limit", newJob(three, 1, nonIndexed), "FF", 1, 0, "", ""},
		{"failed past the backoff limit", newJob(three, 2, nonIndexed), "FFFA", 0, 1, "FailureTarget/BackoffLimitExceeded,Failed/BackoffLimitExceeded", ""},
		{"work queue: one success, the others finish", newJob(nil, 3, nonIndexed), "SAA", 0, 0, "", ""},
		{"work queue: done when all have", newJob(nil, 3, nonIndexed), "SSF", 0, 0, "SuccessCriteriaMet/CompletionsReached,Complete/CompletionsReached", ""},
		{"indexed: the missing indexes", newJob(three, 3, indexed), "-S-", 2, 0, "", "1"},
		{"indexed: complete", newJob(three, 3, indexed), "SSS", 0, 0, "SuccessCriteriaMet/CompletionsReached,Complete/CompletionsReached", "0-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := Plan(tc.job, podsOf(tc.job, tc.states), t0.Add(time.Minute))
			if len(st.Create) != tc.create || len(st.Delete) != tc.delete {
				t.Errorf("create %d delete %d, want %d %d", len(st.Create), len(st.Delete), tc.create, tc.delete)
			}
			if got := cond(st.Status); got != tc.conditions {
				t.Errorf("conditions %q, want %q", got, tc.conditions)
			}
			if st.Status.CompletedIndexes != tc.indexes {
				t.Errorf("completedIndexes %q, want %q", st.Status.CompletedIndexes, tc.indexes)
			}
			if st.Status.StartTime == nil {
				t.Error("no startTime")
			}
		})
	}
}

func TestIndexedPods(t *testing.T) {
	j := newJob(ptr.To[int32](3), 3, batchv1.IndexedCompletion)
	st := Plan(j, nil, t0)
	for i, p := range st.Create {
		want := "pi-" + string(rune('0'+i)) + "-"
		if p.GenerateName != want || p.Annotations[CompletionIndexAnnotation] != string(rune('0'+i)) {
			t.Errorf("pod %d: generateName %q annotations %v", i, p.GenerateName, p.Annotations)
		}
		if e := p.Spec.Containers[0].Env; len(e) != 1 || e[0].Name != "JOB_COMPLETION_INDEX" {
			t.Errorf("pod %d env %v", i, e)
		}
	}
	if j.Spec.Template.Annotations != nil || len(j.Spec.Template.Spec.Containers[0].Env) != 0 {
		t.Error("the template was changed")
	}
}

func TestDeadlineSuspendTTL(t *testing.T) {
	j := newJob(ptr.To[int32](1), 1, batchv1.NonIndexedCompletion)
	j.Spec.ActiveDeadlineSeconds = ptr.To[int64](30)
	j.Status.StartTime = &metav1.Time{Time: t0}
	st := Plan(j, podsOf(j, "A"), t0.Add(10*time.Second))
	if cond(st.Status) != "" || st.RequeueAfter != 20*time.Second {
		t.Errorf("before the deadline: %q, requeue %v", cond(st.Status), st.RequeueAfter)
	}
	st = Plan(j, podsOf(j, "A"), t0.Add(31*time.Second))
	if !strings.Contains(cond(st.Status), "Failed/DeadlineExceeded") || len(st.Delete) != 1 {
		t.Errorf("past the deadline: %q, deletes %d", cond(st.Status), len(st.Delete))
	}

	s := newJob(ptr.To[int32](1), 1, batchv1.NonIndexedCompletion)
	s.Spec.Suspend = ptr.To(true)
	st = Plan(s, podsOf(s, "A"), t0)
	if cond(st.Status) != "Suspended/JobSuspended" || len(st.Delete) != 1 || len(st.Create) != 0 {
		t.Errorf("suspended: %q, deletes %d creates %d", cond(st.Status), len(st.Delete), len(st.Create))
	}

	done := newJob(ptr.To[int32](1), 1, batchv1.NonIndexedCompletion)
	done.Spec.TTLSecondsAfterFinished = ptr.To[int32](60)
	st = Plan(done, podsOf(done, "S"), t0)
	done.Status = st.Status
	if st = Plan(done, podsOf(done, "S"), t0.Add(30*time.Second)); st.Expired || st.RequeueAfter != 30*time.Second {
		t.Errorf("within the TTL: expired %v, requeue %v", st.Expired, st.RequeueAfter)
	}
	if st = Plan(done, podsOf(done, "S"), t0.Add(61*time.Second)); !st.Expired {
		t.Error("past the TTL, not expired")
	}
}
