package replicaset

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/controller"
)

// rankForDeletion orders pods so that the ones to delete first come first,
// as kube-controller-manager ranks them: unscheduled before scheduled,
// pending before unknown before running, not ready before ready, ready for
// less time before ready for longer, more restarts before fewer, newer
// before older.
func rankForDeletion(pods []*corev1.Pod) {
	phaseRank := map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}
	readySince := func(p *corev1.Pod) int64 {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return c.LastTransitionTime.UnixNano()
			}
		}
		return 0
	}
	restarts := func(p *corev1.Pod) int32 {
		var n int32
		for _, c := range p.Status.ContainerStatuses {
			n = max(n, c.RestartCount)
		}
		return n
	}
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
			return a.Spec.NodeName == ""
		}
		if phaseRank[a.Status.Phase] != phaseRank[b.Status.Phase] {
			return phaseRank[a.Status.Phase] < phaseRank[b.Status.Phase]
		}
		ra, rb := controller.PodReady(a), controller.PodReady(b)
		if ra != rb {
			return !ra
		}
		if ra && readySince(a) != readySince(b) {
			return readySince(a) > readySince(b)
		}
		if restarts(a) != restarts(b) {
			return restarts(a) > restarts(b)
		}
		return a.CreationTimestamp.After(b.CreationTimestamp.Time)
	})
}
