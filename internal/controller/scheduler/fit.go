package scheduler

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/controller"
)

// Fit explains why a node cannot run a pod ("" when it can).
func Fit(pod *corev1.Pod, node *corev1.Node) string {
	if node.DeletionTimestamp != nil {
		return "node(s) were being deleted"
	}
	if node.Spec.Unschedulable && !tolerates(pod, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}) {
		return "node(s) were unschedulable"
	}
	if !controller.NodeReady(node) {
		return "node(s) were not ready"
	}
	// nodeSelector and the required node affinity (matchExpressions and
	// matchFields), with kube-scheduler's own matcher; preferred affinity
	// and pod (anti-)affinity are not weighed (docs/architecture.md).
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		return "node(s) didn't match Pod's node affinity/selector"
	}
	for _, t := range node.Spec.Taints {
		if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !tolerates(pod, t) {
			return fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value)
		}
	}
	return ""
}

func tolerates(pod *corev1.Pod, taint corev1.Taint) bool {
	for _, tol := range pod.Spec.Tolerations {
		if tol.ToleratesTaint(klog.Background(), &taint, false) {
			return true
		}
	}
	return false
}

// choose picks the feasible node running the fewest pods (ties by name),
// spreading pods evenly; it returns "" and kube-scheduler's style of
// explanation when none fits.
func choose(pod *corev1.Pod, nodes []*corev1.Node, load map[string]int, used map[string][]hostPort) (string, string) {
	want := hostPortsOf(pod)
	reasons := map[string]int{}
	best, bestLoad := "", 0
	sorted := append([]*corev1.Node(nil), nodes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, n := range sorted {
		if why := Fit(pod, n); why != "" {
			reasons[why]++
			continue
		}
		if conflicts(want, used[n.Name]) {
			reasons["node(s) didn't have free ports for the requested pod ports"]++
			continue
		}
		if best == "" || load[n.Name] < bestLoad {
			best, bestLoad = n.Name, load[n.Name]
		}
	}
	if best != "" {
		return best, ""
	}
	parts := make([]string, 0, len(reasons))
	for why, n := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, why))
	}
	sort.Strings(parts)
	msg := fmt.Sprintf("0/%d nodes are available", len(nodes))
	if len(parts) > 0 {
		msg += ": " + strings.Join(parts, ", ")
	}
	return "", msg + "."
}

// hostPort is a port a pod takes on its node's addresses.
type hostPort struct {
	ip    string // "0.0.0.0": all of them
	port  int32
	proto corev1.Protocol
}

func hostPortsOf(pod *corev1.Pod) []hostPort {
	var out []hostPort
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			hp := hostPort{ip: p.HostIP, port: p.HostPort, proto: p.Protocol}
			if hp.ip == "" || hp.ip == "::" {
				hp.ip = "0.0.0.0"
			}
			if hp.proto == "" {
				hp.proto = corev1.ProtocolTCP
			}
			out = append(out, hp)
		}
	}
	return out
}

// conflicts reports whether a port of want is taken, as kube-scheduler's
// NodePorts filter judges: the same port and protocol on the same
// address, or on all of them.
func conflicts(want, used []hostPort) bool {
	for _, w := range want {
		for _, u := range used {
			if w.port == u.port && w.proto == u.proto && (w.ip == u.ip || w.ip == "0.0.0.0" || u.ip == "0.0.0.0") {
				return true
			}
		}
	}
	return false
}
