package core

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/apis"

	. "github.com/svcnet/svcnet/internal/registry/registrytest"
)

func replicationController(mutate func(*corev1.ReplicationController)) *corev1.ReplicationController {
	return Mutated(&corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ReplicationControllerSpec{Template: &corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27"}}},
		}},
	}, mutate)
}

func TestReplicationControllerDefaults(t *testing.T) {
	rc := replicationController(nil)
	CheckErrors(t, ValidateCreate(ReplicationController, rc))
	if ptr.Deref(rc.Spec.Replicas, -1) != 1 || rc.Spec.Selector["app"] != "web" || rc.Labels["app"] != "web" ||
		rc.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("defaulted to replicas %v, selector %v, labels %v, restart policy %q",
			rc.Spec.Replicas, rc.Spec.Selector, rc.Labels, rc.Spec.Template.Spec.RestartPolicy)
	}
	own := replicationController(func(rc *corev1.ReplicationController) {
		rc.Labels = map[string]string{"team": "a"}
		rc.Spec.Selector = map[string]string{"app": "web"}
		rc.Spec.Template.Labels["version"] = "1"
	})
	CheckErrors(t, ValidateCreate(ReplicationController, own))
	if len(own.Labels) != 1 || len(own.Spec.Selector) != 1 {
		t.Errorf("own labels %v and selector %v replaced", own.Labels, own.Spec.Selector)
	}
}

func TestReplicationControllerValidate(t *testing.T) {
	RunCreate(t, ReplicationController, replicationController, []Case[*corev1.ReplicationController]{
		{"defaulted", nil, nil},
		{"zero replicas", func(rc *corev1.ReplicationController) { rc.Spec.Replicas = ptr.To[int32](0) }, nil},
		{"negative replicas", func(rc *corev1.ReplicationController) { rc.Spec.Replicas = ptr.To[int32](-1) }, []string{Inv("spec.replicas")}},
		{"selector that does not match", func(rc *corev1.ReplicationController) { rc.Spec.Selector = map[string]string{"app": "db"} },
			[]string{Inv("spec.template.metadata.labels")}},
		{"no template", func(rc *corev1.ReplicationController) {
			rc.Spec.Template = nil
			rc.Spec.Selector = map[string]string{"app": "web"}
		}, []string{Req("spec.template")}},
		{"no template, bad selector", func(rc *corev1.ReplicationController) {
			rc.Spec.Template = nil
			rc.Spec.Selector = map[string]string{"app": "a b"}
		}, []string{Inv("spec.selector"), Req("spec.template")}},
		{"no template, no selector", func(rc *corev1.ReplicationController) { rc.Spec.Template = nil },
			[]string{Req("spec.selector"), Req("spec.template")}},
		{"no selector from an unlabelled template", func(rc *corev1.ReplicationController) { rc.Spec.Template.Labels = nil },
			[]string{Req("spec.selector")}},
		{"no selector, and an invalid template", func(rc *corev1.ReplicationController) {
			rc.Spec.Template.Labels = nil
			rc.Spec.Template.Spec.Containers[0].Image = ""
		}, []string{Req("spec.selector"), Req("spec.template.spec.containers[0].image")}},
		{"pods that never restart", func(rc *corev1.ReplicationController) {
			rc.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		}, []string{Unsup("spec.template.spec.restartPolicy")}},
		{"duplicate container names", func(rc *corev1.ReplicationController) {
			rc.Spec.Template.Spec.Containers = append(rc.Spec.Template.Spec.Containers, corev1.Container{Name: "nginx", Image: "nginx"})
		}, []string{"spec.template.spec.containers[1].name: Duplicate value"}},
		{"bad name", func(rc *corev1.ReplicationController) { rc.Name = "web_1" }, []string{Inv("metadata.name")}},
		{"negative minReadySeconds", func(rc *corev1.ReplicationController) { rc.Spec.MinReadySeconds = -1 },
			[]string{Inv("spec.minReadySeconds")}},
		{"active deadline in the template", func(rc *corev1.ReplicationController) {
			rc.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
		}, []string{Forbid("spec.template.spec.activeDeadlineSeconds")}},
	})
}

func TestReplicationControllerUpdate(t *testing.T) {
	cases := []struct {
		name      string
		status    bool // through the status subresource
		mutate    func(*corev1.ReplicationController)
		wantGen   int64
		wantReps  int32
		wantReady int32
	}{
		{"scale", false, func(rc *corev1.ReplicationController) { rc.Spec.Replicas = ptr.To[int32](3) }, 2, 3, 1},
		{"status on the main resource", false, func(rc *corev1.ReplicationController) { rc.Status.ReadyReplicas = 2 }, 1, 1, 1},
		{"status subresource", true, func(rc *corev1.ReplicationController) { rc.Status.ReadyReplicas = 2 }, 1, 1, 2},
		{"scale through the status subresource", true, func(rc *corev1.ReplicationController) { rc.Spec.Replicas = ptr.To[int32](3) }, 1, 1, 1},
		// Unlike a ReplicaSet's, a ReplicationController's selector may change.
		{"new selector", false, func(rc *corev1.ReplicationController) {
			rc.Spec.Selector["version"] = "2"
			rc.Spec.Template.Labels["version"] = "2"
		}, 2, 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := replicationController(nil)
			apis.Scheme.Default(old)
			old.Status.ReadyReplicas = 7
			Create(t, Ctx(ReplicationController), ReplicationController, old)
			if old.Generation != 1 || old.Status.ReadyReplicas != 0 {
				t.Fatalf("created with generation %d, status %+v", old.Generation, old.Status)
			}
			old.ResourceVersion, old.Status.ReadyReplicas = "3", 1
			obj := old.DeepCopy()
			tc.mutate(obj)
			Update(t, Ctx(ReplicationController), ReplicationController, tc.status, obj, old)
			if obj.Generation != tc.wantGen || *obj.Spec.Replicas != tc.wantReps || obj.Status.ReadyReplicas != tc.wantReady {
				t.Errorf("generation %d, replicas %d, ready %d; want %d, %d, %d", obj.Generation, *obj.Spec.Replicas,
					obj.Status.ReadyReplicas, tc.wantGen, tc.wantReps, tc.wantReady)
			}
		})
	}
}

func TestReplicationControllerTableAndFields(t *testing.T) {
	cols := []string{"Name", "Desired", "Current", "Ready", "Age", "Containers*", "Images*", "Selector*"}
	cases := []struct {
		name   string
		mutate func(*corev1.ReplicationController)
		want   []any
	}{
		{"running", func(rc *corev1.ReplicationController) {
			rc.Spec.Replicas = ptr.To[int32](3)
			rc.Spec.Selector = map[string]string{"app": "web", "tier": "fe"}
			rc.Status = corev1.ReplicationControllerStatus{Replicas: 2, ReadyReplicas: 1}
		}, []any{"web", int64(3), int64(2), int64(1), "2d", "nginx", "nginx:1.27", "app=web,tier=fe"}},
		{"replicas not set", func(rc *corev1.ReplicationController) { rc.Spec.Template = nil },
			[]any{"web", int64(1), int64(0), int64(0), "2d", "", "", ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := replicationController(tc.mutate)
			rc.CreationTimestamp = TwoDaysAgo()
			checkRow(t, ReplicationController, rc, cols, tc.want)
		})
	}
	rc := replicationController(func(rc *corev1.ReplicationController) { rc.Status.Replicas = 4 })
	checkFields(t, ReplicationController, rc, map[string]string{"metadata.name": "web", "metadata.namespace": "default", "status.replicas": "4"})
}
