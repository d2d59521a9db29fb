package podstate

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// StorageCheckPeriod is how often the agent measures the local storage of
// pods with ephemeral-storage limits (kubelet's eviction manager checks
// every 10 s).
const StorageCheckPeriod = 10 * time.Second

// HasStorageLimit reports whether a container of pod limits its
// ephemeral storage, the only case the agent measures.
func HasStorageLimit(pod *corev1.Pod) bool {
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if _, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
			return true
		}
	}
	return false
}

// StorageEviction applies kubelet's ephemeral-storage limit eviction to
// the measured local storage of each running container (its writable
// layer and its log, by name): the pod is evicted when all its containers
// together use more than the sum of their limits, or one uses more than
// its own, with kubelet's messages. nil: within the limits.
func StorageEviction(pod *corev1.Pod, usage map[string]int64) *Rejection {
	var total int64
	limit, limited := resource.Quantity{}, false
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		total += usage[c.Name]
		if l, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
			limit.Add(l)
			limited = true
		}
	}
	if limited && total > limit.Value() {
		return &Rejection{Reason: "Evicted",
			Message: fmt.Sprintf("Pod ephemeral local storage usage exceeds the total limit of containers %s. ", limit.String())}
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		l, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]
		if ok && usage[c.Name] > l.Value() {
			return &Rejection{Reason: "Evicted",
				Message: fmt.Sprintf("Container %s exceeded its local ephemeral storage limit %q. ", c.Name, l.String())}
		}
	}
	return nil
}
