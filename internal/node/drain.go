package node

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/node/pods"
	"github.com/svcnet/svcnet/internal/programmed"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// EndpointDrainAnnotation on a pod set to "none" stops it as kubelet
// does, SIGTERM at once; see holdsForDrain for what happens otherwise.
const EndpointDrainAnnotation = "svcnet.dev/endpoint-drain"

// EndpointDrainDelayAnnotation on a pod overrides the node's
// --endpoint-drain-delay for it.
const EndpointDrainDelayAnnotation = "svcnet.dev/endpoint-drain-delay"

// holdsForDrain says whether a deleted pod is held before its SIGTERM:
// Kubernetes sends it at the moment the pod leaves its Services'
// endpoints, so a server that exits at once refuses the connections
// every proxy sends it until the proxy has synced. A pod that backs a
// Service (services is how many select it), has a grace period and no
// preStop hook (which is the user's own drain, run at once as kubelet
// runs it) is held until the proxies have stopped sending it new
// connections, for at most half its grace period (drainLimit).
func holdsForDrain(pod *corev1.Pod, services int, grace time.Duration) bool {
	if grace <= 0 || services == 0 || pod.Annotations[EndpointDrainAnnotation] == "none" {
		return false
	}
	for _, c := range pod.Spec.Containers {
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			return false
		}
	}
	return true
}

// drainLimit bounds a pod's drain, so that its containers keep half
// their grace period for their own shutdown however slow the control
// plane or a proxy is.
func drainLimit(grace time.Duration) time.Duration { return grace / 2 }

// stillRouted reports whether a slice still offers one of addrs to new
// connections, read as the proxies read it (svcstate): a ready endpoint
// whose address is one of addrs. Serving-and-terminating endpoints are
// not: proxies use those only when a Service has no ready one, and then
// the pod is still serving what it can until its grace ends.
func stillRouted(list []discovery.EndpointSlice, addrs []string) bool {
	for i := range list {
		for _, ep := range list[i].Endpoints {
			if svcstate.EndpointReady(ep.Conditions) && slices.Contains(addrs, svcstate.EndpointAddress(ep)) {
				return true
			}
		}
	}
	return false
}

// stopDeleted stops a pod being deleted and removes it from the API for
// good: a pod that backs Services is first held (see holdsForDrain) until
// no slice offers it and every live proxy has programmed that (see
// awaitUnrouted and internal/programmed), then for the drain delay if one
// is set, all within drainLimit; then its containers stop within what is
// left of its grace period.
func (w *podWorker) stopDeleted(ctx context.Context, terminal bool) {
	if !w.sb.Adopted() && !terminal {
		// Deleted while the agent was away: stop what an earlier
		// run left running, hooks and grace included.
		w.sb.EnsureSandbox(ctx)
	}
	grace := pods.GracePeriod(w.pod, nil)
	svcs := w.a.selectingServices(w.pod)
	if holdsForDrain(w.pod, len(svcs), grace) && w.sb.AnyRunning() {
		start := time.Now()
		w.drain(ctx, svcs, drainLimit(grace))
		grace -= time.Since(start)
	}
	w.terminate(ctx, grace)
	w.finishDeletion(ctx)
}

// drain holds the pod, at most limit, until the proxies no longer send
// it new connections, and logs what it waited for.
func (w *podWorker) drain(ctx context.Context, svcs []string, limit time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start := time.Now()
	version, unrouted := w.a.awaitUnrouted(ctx, w.pod.Namespace, svcs, w.podAddr())
	unroutedAfter := time.Since(start)
	var o programmed.Outcome
	if unrouted && w.a.programmed != nil {
		o = w.a.programmed.Wait(ctx, version)
	}
	programmedAfter := time.Since(start)
	if d := w.endpointDrainDelay(); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	attrs := []any{"unrouted", unrouted, "unroutedAfter", unroutedAfter.Round(time.Millisecond),
		"sliceVersion", version, "proxies", o.Consumers, "programmedAfter", programmedAfter.Round(time.Millisecond),
		"held", time.Since(start).Round(time.Millisecond)}
	if !unrouted || !o.Done() {
		w.log().Warn("stopping the pod before every proxy stopped sending it connections", append(attrs, "behind", o.Behind, "limit", limit)...)
		return
	}
	if o.Consumers == 0 {
		// kube-proxy, say: nothing tells when it has synced, and only
		// --endpoint-drain-delay stands in for that.
		w.log().Info("drained as far as the slices tell: no proxy publishes what it has programmed", attrs...)
		return
	}
	w.log().Info("drained: no proxy sends the pod new connections", attrs...)
}

// podAddr is the pod's address, or "" before its sandbox has one.
func (w *podWorker) podAddr() string {
	if ip := w.sb.IP(); ip.IsValid() {
		return ip.String()
	}
	return ""
}

// endpointDrainDelay is the node's, or the pod's own by annotation.
func (w *podWorker) endpointDrainDelay() time.Duration {
	v, ok := w.pod.Annotations[EndpointDrainDelayAnnotation]
	if !ok {
		return w.a.cfg.EndpointDrainDelay
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		w.a.Event(w.pod, corev1.EventTypeWarning, "InvalidAnnotation", "%s=%q is not a duration like 500ms or 0s; using the node's %s",
			EndpointDrainDelayAnnotation, v, w.a.cfg.EndpointDrainDelay)
		return w.a.cfg.EndpointDrainDelay
	}
	return d
}

// finishDeletion removes a terminated pod from the node and then from
// the API for good, as kubelet does once its containers have stopped.
func (w *podWorker) finishDeletion(ctx context.Context) {
	w.sb.Remove()
	uid := w.uid
	zero := int64(0)
	err := w.a.client.CoreV1().Pods(w.pod.Namespace).Delete(ctx, w.pod.Name,
		metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		w.log().Warn("delete terminated pod", "err", err)
	}
}
