package scheduler

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, ready bool, mutate ...func(*corev1.Node)) *corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
	for _, m := range mutate {
		m(n)
	}
	return n
}

func TestChoose(t *testing.T) {
	ssd := func(n *corev1.Node) { n.Labels["disk"] = "ssd" }
	tainted := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	}
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	plain := &corev1.Pod{}
	picky := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"disk": "ssd"}}}
	tolerant := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}}}}
	affinity := func(terms ...corev1.NodeSelectorTerm) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}}}
	}
	// As e2e's SetNodeSelection pins a pod to a node by name.
	pinned := affinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
		{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"c"}}}})
	notSSD := affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "disk", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"ssd"}}}})
	cases := []struct {
		name  string
		pod   *corev1.Pod
		nodes []*corev1.Node
		load  map[string]int
		want  string
		why   string
	}{
		{"least loaded", plain, []*corev1.Node{node("a", true), node("b", true)}, map[string]int{"a": 3, "b": 1}, "b", ""},
		{"tie by name", plain, []*corev1.Node{node("b", true), node("a", true)}, nil, "a", ""},
		{"not ready skipped", plain, []*corev1.Node{node("a", false), node("b", true)}, map[string]int{"b": 9}, "b", ""},
		{"selector", picky, []*corev1.Node{node("a", true), node("b", true, ssd)}, map[string]int{"b": 9}, "b", ""},
		{"nothing fits", picky, []*corev1.Node{node("a", true), node("b", false)}, nil, "",
			"0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) were not ready."},
		{"affinity by node name", pinned, []*corev1.Node{node("a", true), node("b", true), node("c", true)}, map[string]int{"c": 9}, "c", ""},
		{"affinity by node name, node not there", pinned, []*corev1.Node{node("a", true)}, nil, "", "1 node(s) didn't match Pod's node affinity/selector"},
		{"affinity expression", notSSD, []*corev1.Node{node("a", true, ssd), node("b", true)}, map[string]int{"b": 9}, "b", ""},
		{"taint", plain, []*corev1.Node{node("a", true, tainted)}, nil, "", "untolerated taint {dedicated: db}"},
		{"tolerated taint", tolerant, []*corev1.Node{node("a", true, tainted)}, nil, "a", ""},
		{"cordoned", plain, []*corev1.Node{node("a", true, cordoned)}, nil, "", "unschedulable"},
		{"no nodes", plain, nil, nil, "", "0/0 nodes are available."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, why := choose(c.pod, c.nodes, c.load, nil)
			if got != c.want || !strings.Contains(why, c.why) {
				t.Errorf("choose = %q, %q; want %q, %q", got, why, c.want, c.why)
			}
		})
	}
}

// TestHostPortConflicts: a node whose pods hold a hostPort is no place
// for another pod asking for it on the same address (or all of them) and
// protocol; another address or protocol fits, as kube-scheduler judges.
func TestHostPortConflicts(t *testing.T) {
	pod := func(ip string, port int32, proto corev1.Protocol) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: port, HostIP: ip, Protocol: proto}}}}}}
	}
	held := hostPortsOf(pod("127.0.0.1", 54323, ""))
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		fits bool
	}{
		{"same address, port and protocol", pod("127.0.0.1", 54323, corev1.ProtocolTCP), false},
		{"all addresses", pod("", 54323, ""), false},
		{"another address", pod("172.18.0.11", 54323, ""), true},
		{"another protocol", pod("127.0.0.1", 54323, corev1.ProtocolUDP), true},
		{"another port", pod("127.0.0.1", 54324, ""), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := choose(tc.pod, []*corev1.Node{node("a", true)}, nil, map[string][]hostPort{"a": held})
			if (got == "a") != tc.fits {
				t.Errorf("choose = %q (%s), want fits=%v", got, why, tc.fits)
			}
			if !tc.fits && !strings.Contains(why, "free ports") {
				t.Errorf("reason %q", why)
			}
		})
	}
}
