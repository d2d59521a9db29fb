package node

import (
	"context"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/svcnet/svcnet/internal/node/prober"
)

// EndpointDrainDelayAnnotation on a pod overrides the node's
// --endpoint-drain-delay for it ("0s": SIGTERM at once, as kubelet).
const EndpointDrainDelayAnnotation = "svcnet.dev/endpoint-drain-delay"

// hookGraceExtension is what kubelet adds once when a preStop hook is
// still running as the grace period ends, so SIGTERM still comes before
// SIGKILL.
const hookGraceExtension = 2 * time.Second

// stopPlan is what stopping one container needs, copied out of the pod
// worker so that the stop can run beside it.
type stopPlan struct {
	spec  *corev1.Container
	podIP netip.Addr
	exec  prober.Exec
	// event reports a failed hook on the pod.
	event func(reason, msg string)
}

// stop ends a container as kubelet does: its preStop hook first, within
// the grace period, then SIGTERM, then SIGKILL once the grace period (and
// the hook's extension) is over. Endpoints of a terminating pod leave the
// Services at once, so a hook that waits ("sleep 5") lets the proxies
// stop sending it connections before it is told to exit.
func (sp stopPlan) stop(stopProcess func(grace time.Duration), grace time.Duration) {
	deadline := time.Now().Add(grace)
	if lc := sp.spec.Lifecycle; lc != nil && lc.PreStop != nil && grace > 0 {
		ok, msg := prober.RunHook(context.Background(), lc.PreStop, sp.spec, sp.podIP, sp.exec, grace)
		if !ok && sp.event != nil {
			sp.event("FailedPreStopHook", "PreStopHook failed: "+msg)
		}
		if time.Until(deadline) < hookGraceExtension {
			deadline = time.Now().Add(hookGraceExtension)
		}
	}
	stopProcess(max(time.Until(deadline), 0))
}

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
