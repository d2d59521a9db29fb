package core

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/svcnet/svcnet/internal/registry/registrytest"
)

func node(mutate func(*corev1.Node)) *corev1.Node {
	return Mutated(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1.example.com", Labels: map[string]string{corev1.LabelHostname: "node-1"}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node-1"}, {Type: corev1.NodeInternalIP, Address: "192.0.2.11"}},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Debian GNU/Linux 13 (trixie)",
				KernelVersion: "6.12.0-1-amd64", ContainerRuntimeVersion: "svcnet://0.9"},
		},
	}, mutate)
}

func TestNodeValidate(t *testing.T) {
	RunCreate(t, Node, node, []Case[*corev1.Node]{
		{"registered node", nil, nil},
		{"pod CIDR", func(n *corev1.Node) {
			n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.1.0/24", []string{"10.244.1.0/24"}
		}, nil},
		{"dual-stack pod CIDRs", func(n *corev1.Node) {
			n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.1.0/24", []string{"10.244.1.0/24", "fd00:10:244:1::/64"}
		}, nil},
		{"bad pod CIDR", func(n *corev1.Node) { n.Spec.PodCIDR = "10.244.1.0" }, []string{Inv("spec.podCIDRs[0]")}},
		{"bad second pod CIDR", func(n *corev1.Node) {
			n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.1.0/24", []string{"10.244.1.0/24", "fd00::/129"}
		}, []string{Inv("spec.podCIDRs[1]")}},
		{"pod CIDR not the first of pod CIDRs", func(n *corev1.Node) {
			n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.2.0/24", []string{"10.244.1.0/24"}
		}, []string{Inv("spec.podCIDR")}},
		{"bad name", func(n *corev1.Node) { n.Name = "Node_1" }, []string{Inv("metadata.name")}},
		{"namespaced", func(n *corev1.Node) { n.Namespace = "default" }, []string{Forbid("metadata.namespace")}},
	})
}

func TestNodeValidateUpdate(t *testing.T) {
	cases := []struct {
		name     string
		old, new string // spec.podCIDR
		want     []string
	}{
		{"pod CIDR assigned", "", "10.244.1.0/24", nil},
		{"pod CIDR kept", "10.244.1.0/24", "10.244.1.0/24", nil},
		{"pod CIDR changed", "10.244.1.0/24", "10.244.2.0/24", []string{Forbid("spec.podCIDRs")}},
		{"pod CIDR removed", "10.244.1.0/24", "", []string{Forbid("spec.podCIDRs")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := node(func(n *corev1.Node) { n.Spec.PodCIDR = tc.old })
			obj := node(func(n *corev1.Node) {
				n.Spec.PodCIDR = tc.new
				n.Spec.Unschedulable = true // always allowed
			})
			CheckErrors(t, ValidateUpdate(Node, obj, old), tc.want...)
		})
	}
}

// A node registers itself with its status (KeepStatusOnCreate); later
// status changes go through nodes/status only.
func TestNodeStatus(t *testing.T) {
	ctx := Ctx(Node)
	n := node(nil)
	Create(t, ctx, Node, n)
	if len(n.Status.Conditions) != 1 || n.Status.NodeInfo.KubeletVersion != "v1.37.2" {
		t.Fatalf("status dropped on create: %+v", n.Status)
	}
	n.ResourceVersion = "2"

	cases := []struct {
		name        string
		status      bool
		mutate      func(*corev1.Node)
		wantVersion string
		wantCordon  bool
	}{
		{"cordon", false, func(n *corev1.Node) { n.Spec.Unschedulable = true }, "v1.37.2", true},
		{"status on the main resource", false, func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = "v1.38.0" }, "v1.37.2", false},
		{"status subresource", true, func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = "v1.38.0" }, "v1.38.0", false},
		{"spec through the status subresource", true, func(n *corev1.Node) { n.Spec.Unschedulable = true }, "v1.37.2", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := n.DeepCopy()
			tc.mutate(obj)
			Update(t, ctx, Node, tc.status, obj, n)
			if obj.Status.NodeInfo.KubeletVersion != tc.wantVersion || obj.Spec.Unschedulable != tc.wantCordon || obj.Generation != 0 {
				t.Errorf("kubelet %s, unschedulable %v, generation %d", obj.Status.NodeInfo.KubeletVersion, obj.Spec.Unschedulable, obj.Generation)
			}
		})
	}
}

func TestNodeTable(t *testing.T) {
	cols := []string{"Name", "Status", "Roles", "Age", "Version", "Internal-IP*", "External-IP*", "OS-Image*", "Kernel-Version*", "Container-Runtime*"}
	cases := []struct {
		name   string
		mutate func(*corev1.Node)
		want   []any
	}{
		{"ready worker", nil, []any{"node-1.example.com", "Ready", "<none>", "2d", "v1.37.2", "192.0.2.11", "<none>",
			"Debian GNU/Linux 13 (trixie)", "6.12.0-1-amd64", "svcnet://0.9"}},
		{"cordoned control plane", func(n *corev1.Node) {
			n.Labels["node-role.kubernetes.io/control-plane"] = ""
			n.Labels["node-role.kubernetes.io/etcd"] = "true"
			n.Labels["node-role.kubernetes.io/"] = ""
			n.Spec.Unschedulable = true
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.7"})
		}, []any{"node-1.example.com", "Ready,SchedulingDisabled", "control-plane,etcd", "2d", "v1.37.2", "192.0.2.11", "203.0.113.7",
			"Debian GNU/Linux 13 (trixie)", "6.12.0-1-amd64", "svcnet://0.9"}},
		{"not ready", func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
		}, []any{"node-1.example.com", "NotReady", "<none>", "2d", "v1.37.2", "192.0.2.11", "<none>",
			"Debian GNU/Linux 13 (trixie)", "6.12.0-1-amd64", "svcnet://0.9"}},
		{"never reported", func(n *corev1.Node) { n.Status = corev1.NodeStatus{} },
			[]any{"node-1.example.com", "Unknown", "<none>", "2d", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := node(tc.mutate)
			n.CreationTimestamp = TwoDaysAgo()
			checkRow(t, Node, n, cols, tc.want)
		})
	}
}

func TestNodeFields(t *testing.T) {
	for _, cordoned := range []bool{false, true} {
		n := node(func(n *corev1.Node) { n.Spec.Unschedulable = cordoned })
		want := "false"
		if cordoned {
			want = "true"
		}
		checkFields(t, Node, n, map[string]string{"metadata.name": "node-1.example.com", "spec.unschedulable": want})
	}
}
