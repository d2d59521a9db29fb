package daemonset

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func node(name string, ready bool, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}}}
}

func daemon(selector map[string]string) *appsv1.DaemonSet {
	one := intstr.FromInt32(1)
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system", UID: "ds-uid", Generation: 2},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec: corev1.PodSpec{NodeSelector: selector, Containers: []corev1.Container{{Name: "c", Image: "svcnet/echo"}}}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &one}}}}
}

// pod on a node: R ready at the current template, O ready at an old one,
// P pending.
func pod(ds *appsv1.DaemonSet, nodeName string, state byte, age int) *corev1.Pod {
	p := NewPod(ds, nodeName)
	p.Name = fmt.Sprintf("agent-%s-%d", nodeName, age)
	p.CreationTimestamp = metav1.NewTime(time.Unix(int64(1000-age), 0))
	if state == 'O' {
		p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = "old"
	}
	if state != 'P' {
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	}
	return p
}

func nodesOf(ps []*corev1.Pod) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Spec.NodeName)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func TestPlan(t *testing.T) {
	ds := daemon(nil)
	gpu := daemon(map[string]string{"gpu": "yes"})
	tainted := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	three := []*corev1.Node{node("n1", true, nil), node("n2", true, map[string]string{"gpu": "yes"}), node("n3", true, nil)}
	for _, tc := range []struct {
		name           string
		ds             *appsv1.DaemonSet
		nodes          []*corev1.Node
		pods           []*corev1.Pod
		create, delete string
		desired, mis   int32
	}{
		{"one pod per node", ds, three, nil, "n1,n2,n3", "", 3, 0},
		{"nodeSelector", gpu, three, nil, "n2", "", 1, 0},
		{"not on a node that is not ready", ds, []*corev1.Node{node("n1", true, nil), node("n2", false, nil)}, nil, "n1", "", 1, 0},
		{"not on an untolerated taint; a pod there goes", ds, []*corev1.Node{node("n1", true, nil, tainted)},
			[]*corev1.Pod{pod(ds, "n1", 'R', 1)}, "", "n1", 0, 1},
		{"the unschedulable taint is tolerated", ds, []*corev1.Node{node("n1", true, nil,
			corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})}, nil, "n1", "", 1, 0},
		{"a second pod on a node goes", ds, three[:1], []*corev1.Pod{pod(ds, "n1", 'R', 2), pod(ds, "n1", 'R', 1)}, "", "n1", 1, 0},
		{"pods of a deleted node go", ds, three[:1], []*corev1.Pod{pod(ds, "n1", 'R', 1), pod(ds, "gone", 'R', 1)}, "", "gone", 1, 0},
		{"rolling update within maxUnavailable", ds, three,
			[]*corev1.Pod{pod(ds, "n1", 'O', 1), pod(ds, "n2", 'O', 1), pod(ds, "n3", 'O', 1)}, "", "n1", 3, 0},
		{"rolling update waits while one is unavailable", ds, three,
			[]*corev1.Pod{pod(ds, "n1", 'P', 1), pod(ds, "n2", 'O', 1), pod(ds, "n3", 'O', 1)}, "", "", 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := Plan(tc.ds, tc.nodes, tc.pods)
			if got := nodesOf(st.Create); got != tc.create {
				t.Errorf("create on %q, want %q", got, tc.create)
			}
			if got := nodesOf(st.Delete); got != tc.delete {
				t.Errorf("delete on %q, want %q", got, tc.delete)
			}
			if st.Status.DesiredNumberScheduled != tc.desired || st.Status.NumberMisscheduled != tc.mis {
				t.Errorf("desired %d misscheduled %d, want %d %d", st.Status.DesiredNumberScheduled, st.Status.NumberMisscheduled, tc.desired, tc.mis)
			}
			for _, p := range st.Create {
				if p.Spec.NodeName == "" || len(p.Spec.Tolerations) == 0 {
					t.Errorf("pod for %s: not bound or no tolerations", p.Spec.NodeName)
				}
			}
		})
	}
}
