package deployment

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
)

func dep(replicas int32, surge, unavail intstr.IntOrString) *appsv1.Deployment {
	return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Strategy: appsv1.DeploymentStrategy{
		Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavail}}}}
}

func rs(name string, spec, available int32, age int) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Unix(int64(age), 0)},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(spec)}, Status: appsv1.ReplicaSetStatus{AvailableReplicas: available, Replicas: spec}}
}

func TestResolveFenceposts(t *testing.T) {
	cases := []struct {
		replicas       int32
		surge, unavail intstr.IntOrString
		wantS, wantU   int32
	}{
		{4, intstr.FromString("25%"), intstr.FromString("25%"), 1, 1},
		{3, intstr.FromString("25%"), intstr.FromString("25%"), 1, 0}, // surge rounds up, unavailable down
		{10, intstr.FromInt(0), intstr.FromInt(0), 0, 1},              // both zero: one may be unavailable
		{10, intstr.FromString("50%"), intstr.FromInt(3), 5, 3},
		{2, intstr.FromInt(0), intstr.FromInt(5), 0, 2}, // never more than the replicas
	}
	for _, c := range cases {
		s, u := resolveFenceposts(dep(c.replicas, c.surge, c.unavail))
		if s != c.wantS || u != c.wantU {
			t.Errorf("%d replicas %v/%v: surge %d unavailable %d, want %d %d", c.replicas, c.surge, c.unavail, s, u, c.wantS, c.wantU)
		}
	}
}

// A rolling update of 4 replicas with 25%/25% proceeds in steps that never
// exceed 5 pods nor drop below 3 available.
func TestRollingUpdateSteps(t *testing.T) {
	d := dep(4, intstr.FromString("25%"), intstr.FromString("25%"))
	old := rs("old", 4, 4, 1)
	newRS := rs("new", 0, 0, 2)
	for step := 0; step < 20; step++ {
		all := []*appsv1.ReplicaSet{old, newRS}
		newRS.Spec.Replicas = ptr.To(newReplicasForRollingUpdate(d, all, newRS))
		if total := specReplicas(old, newRS); total > 5 {
			t.Fatalf("step %d: %d pods, surge exceeded", step, total)
		}
		for r, to := range oldScaleDowns(d, all, []*appsv1.ReplicaSet{old}, newRS) {
			r.Spec.Replicas = ptr.To(to)
		}
		// Pods become available at once in this model.
		newRS.Status.AvailableReplicas = *newRS.Spec.Replicas
		old.Status.AvailableReplicas = *old.Spec.Replicas
		if avail := availableReplicas(old, newRS); avail < 3 {
			t.Fatalf("step %d: %d available, below 4-1", step, avail)
		}
		if *newRS.Spec.Replicas == 4 && *old.Spec.Replicas == 0 {
			return
		}
	}
	t.Fatalf("rollout did not finish: new %d old %d", *newRS.Spec.Replicas, *old.Spec.Replicas)
}

func TestUnhealthyOldReplicasGoFirst(t *testing.T) {
	d := dep(4, intstr.FromInt(1), intstr.FromInt(0))
	old := rs("old", 4, 2, 1) // 2 of its 4 pods are not available
	newRS := rs("new", 1, 0, 2)
	downs := oldScaleDowns(d, []*appsv1.ReplicaSet{old, newRS}, []*appsv1.ReplicaSet{old}, newRS)
	// 5 pods, 4 must stay... minus the new one's unavailable pod: nothing
	// available may go, only unhealthy pods (budget 5-4-1 = 0).
	if len(downs) != 0 {
		t.Errorf("scaled down %v with no budget", downs)
	}
	newRS.Status.AvailableReplicas = 1
	downs = oldScaleDowns(d, []*appsv1.ReplicaSet{old, newRS}, []*appsv1.ReplicaSet{old}, newRS)
	if downs[old] != 3 {
		t.Errorf("old scaled to %d, want 3 (one unhealthy pod removed)", downs[old])
	}
}

func TestTemplateHash(t *testing.T) {
	tmpl := &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}}}
	a, b := controller.TemplateHash(tmpl, nil), controller.TemplateHash(tmpl.DeepCopy(), nil)
	if a != b || len(a) < 8 {
		t.Errorf("hash %q %q", a, b)
	}
	if c := controller.TemplateHash(tmpl, ptr.To[int32](1)); c == a {
		t.Error("collision count does not change the hash")
	}
	other := tmpl.DeepCopy()
	other.Labels["app"] = "y"
	if controller.TemplateHash(other, nil) == a {
		t.Error("different templates, same hash")
	}
}
