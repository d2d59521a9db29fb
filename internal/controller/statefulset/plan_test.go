package statefulset

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func set(replicas int32, policy appsv1.PodManagementPolicyType, partition int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "set-uid"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas), ServiceName: "nginx", PodManagementPolicy: policy,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "svcnet/echo"}}}},
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(partition)}}},
	}
}

// pods makes the set's pods from states: R running and ready, P pending,
// T terminating, F failed, O at an old revision (running and ready).
func pods(s *appsv1.StatefulSet, states string) []*corev1.Pod {
	var out []*corev1.Pod
	for i, st := range states {
		rev := Revision(s)
		if st == 'O' {
			rev = "web-old"
		}
		p := NewPod(s, i, rev)
		switch st {
		case 'R', 'O':
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		case 'P':
			p.Status.Phase = corev1.PodPending
		case 'T':
			p.Status.Phase = corev1.PodRunning
			p.DeletionTimestamp = &metav1.Time{}
		case 'F':
			p.Status.Phase = corev1.PodFailed
		}
		out = append(out, p)
	}
	return out
}

func names(ps []*corev1.Pod) string {
	s := ""
	for _, p := range ps {
		s += p.Name + " "
	}
	return s
}

func TestPlan(t *testing.T) {
	ordered, parallel := appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement
	for _, tc := range []struct {
		name           string
		set            *appsv1.StatefulSet
		states         string
		create, delete string
		ready, updated int32
	}{
		{"ordered: the first pod only", set(3, ordered, 0), "", "web-0 ", "", 0, 0},
		{"ordered: the next once the first is ready", set(3, ordered, 0), "R", "web-1 ", "", 1, 1},
		{"ordered: waits for a pending pod", set(3, ordered, 0), "RP", "", "", 1, 2},
		{"parallel: all at once", set(3, parallel, 0), "", "web-0 web-1 web-2 ", "", 0, 0},
		{"parallel: past a pending pod", set(3, parallel, 0), "P", "web-1 web-2 ", "", 0, 1},
		{"a failed pod is replaced", set(2, ordered, 0), "RF", "", "web-1 ", 1, 2},
		{"scale down: highest first, one at a time", set(1, ordered, 0), "RRR", "", "web-2 ", 3, 3},
		{"scale down waits for the terminating one", set(1, ordered, 0), "RRT", "", "", 2, 3},
		{"parallel scale down: all at once", set(1, parallel, 0), "RRR", "", "web-2 web-1 ", 3, 3},
		{"rolling update: the highest old pod goes", set(3, ordered, 0), "OOO", "", "web-2 ", 3, 0},
		{"rolling update: then the next", set(3, ordered, 0), "OOR", "", "web-1 ", 3, 1},
		{"rolling update waits for readiness", set(3, ordered, 0), "OOP", "", "", 2, 1},
		{"partition keeps the pods below it", set(3, ordered, 2), "OOR", "", "", 3, 1},
		{"nothing to do", set(2, ordered, 0), "RR", "", "", 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := Plan(tc.set, pods(tc.set, tc.states))
			if got := names(st.Create); got != tc.create {
				t.Errorf("create %q, want %q", got, tc.create)
			}
			if got := names(st.Delete); got != tc.delete {
				t.Errorf("delete %q, want %q", got, tc.delete)
			}
			if st.Status.ReadyReplicas != tc.ready || st.Status.UpdatedReplicas != tc.updated {
				t.Errorf("ready %d updated %d, want %d %d", st.Status.ReadyReplicas, st.Status.UpdatedReplicas, tc.ready, tc.updated)
			}
		})
	}
}

func TestNewPod(t *testing.T) {
	s := set(3, appsv1.OrderedReadyPodManagement, 0)
	p := NewPod(s, 2, "web-abc")
	if p.Name != "web-2" || p.Spec.Hostname != "web-2" || p.Spec.Subdomain != "nginx" {
		t.Errorf("name %s hostname %s subdomain %s", p.Name, p.Spec.Hostname, p.Spec.Subdomain)
	}
	want := map[string]string{"app": "web", PodNameLabel: "web-2", PodIndexLabel: "2", RevisionLabel: "web-abc"}
	if fmt.Sprint(p.Labels) != fmt.Sprint(want) {
		t.Errorf("labels %v", p.Labels)
	}
	if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != "set-uid" {
		t.Error("not controlled by the set")
	}
	if s.Spec.Template.Labels[PodNameLabel] != "" {
		t.Error("the template was changed")
	}
	for _, name := range []string{"web-x", "web-01", "other-1", "web--1"} {
		if Ordinal(s, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}) != -1 {
			t.Errorf("%s has an ordinal", name)
		}
	}
}
