package node

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/node/pods"
)

// EndpointDrainDelayAnnotation on a pod overrides the node's
// --endpoint-drain-delay for it ("0s": SIGTERM at once, as kubelet).
const EndpointDrainDelayAnnotation = "svcnet.dev/endpoint-drain-delay"

// drainDelay is how long to keep a deleted pod running before stopping
// its containers: Kubernetes sends SIGTERM at the moment the pod leaves
// its Services' endpoints, so a server that exits at once refuses the
// connections every proxy sends it until it has synced. A pod that backs
// a Service (services is how many select it) and has no preStop hook
// (which is the user's own drain) gets delay, at most half its grace
// period, so it is told to stop only once the proxies have stopped
// sending it new connections.
func drainDelay(pod *corev1.Pod, services int, delay, grace time.Duration) time.Duration {
	if delay <= 0 || grace <= 0 || services == 0 {
		return 0
	}
	for _, c := range pod.Spec.Containers {
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			return 0
		}
	}
	return min(delay, grace/2)
}

// drainPlan is how a deleted pod that backs Services waits before its
// SIGTERM: first until no EndpointSlice routes new connections to it
// (at most untilGone, which covers an endpoint controller slowed by
// load), then delay more for every node's proxy to apply that.
type drainPlan struct {
	untilGone, delay time.Duration
}

// planDrain splits the drain of a pod: delay (from drainDelay) after the
// slices show the endpoint gone, and the wait for that at most what is
// left of half the grace period, so the container keeps half its grace
// for its own shutdown however slow the control plane is.
func planDrain(delay, grace time.Duration) drainPlan {
	if delay <= 0 {
		return drainPlan{}
	}
	return drainPlan{untilGone: max(grace/2-delay, 0), delay: delay}
}

// stillRouted reports whether a slice still offers one of addrs to new
// connections: listed as ready (an unset ready means ready, as the API
// defines it). Serving-and-terminating endpoints are not: proxies use
// those only when a Service has no ready one, and then the pod is still
// serving what it can until its grace ends.
func stillRouted(slices []discovery.EndpointSlice, addrs []string) bool {
	for i := range slices {
		for _, ep := range slices[i].Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				for _, want := range addrs {
					if a == want {
						return true
					}
				}
			}
		}
	}
	return false
}

// stopDeleted stops a pod being deleted and removes it from the API for
// good: a pod that backs Services first drains (see drainDelay), then
// its containers stop within what is left of its grace period.
func (w *podWorker) stopDeleted(ctx context.Context, terminal bool) {
	if !w.sb.Adopted() && !terminal {
		// Deleted while the agent was away: stop what an earlier
		// run left running, hooks and grace included.
		w.sb.EnsureSandbox(ctx)
	}
	grace := pods.GracePeriod(w.pod, nil)
	svcs := w.a.selectingServices(w.pod)
	if d := drainDelay(w.pod, len(svcs), w.endpointDrainDelay(), grace); d > 0 && w.sb.AnyRunning() {
		start := time.Now()
		plan := planDrain(d, grace)
		w.a.awaitUnrouted(ctx, w.pod.Namespace, svcs, w.podAddr(), plan.untilGone)
		select {
		case <-time.After(plan.delay):
		case <-ctx.Done():
		}
		grace -= time.Since(start)
	}
	w.terminate(ctx, grace)
	w.finishDeletion(ctx)
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
