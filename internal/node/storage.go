package node

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/node/pods"
	"github.com/svcnet/svcnet/internal/node/podstate"
)

// checkStorage evicts the pod when its containers' local storage (each
// one's writable layer and log) exceeds their ephemeral-storage limits,
// as kubelet's eviction manager does, every podstate.StorageCheckPeriod.
// Unlike kubelet, emptyDir volumes are not counted.
func (w *podWorker) checkStorage(ctx context.Context) {
	if !podstate.HasStorageLimit(w.pod) || time.Now().Before(w.nextStorageCheck) {
		return
	}
	w.nextStorageCheck = time.Now().Add(podstate.StorageCheckPeriod)
	usage := w.sb.StorageUsage()
	r := podstate.StorageEviction(w.pod, usage)
	if r == nil {
		return
	}
	w.log().Warn("evicting the pod", "reason", r.Reason, "message", r.Message)
	w.a.Event(w.pod, corev1.EventTypeWarning, r.Reason, "%s", r.Message)
	w.state.Rejected = r
	// At once, as kubelet's eviction manager stops a pod over its
	// ephemeral-storage limits.
	w.terminate(ctx, pods.GracePeriod(w.pod, ptr.To(time.Duration(0))))
}

// storageWake is d, or less when the next storage check is due sooner.
func (w *podWorker) storageWake(d time.Duration) time.Duration {
	if !podstate.HasStorageLimit(w.pod) || podstate.Terminal(w.phase()) {
		return d
	}
	return min(d, max(time.Until(w.nextStorageCheck), 10*time.Millisecond))
}
