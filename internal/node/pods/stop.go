package pods

import (
	"context"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/node/prober"
	"github.com/svcnet/svcnet/internal/node/runtime"
)

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

// stopPlan copies what stopping c needs, to stop it beside the worker.
func (p *Pod) stopPlan(c *Container) stopPlan {
	pod := p.pod
	return stopPlan{spec: &c.Spec, podIP: p.ip, exec: p.execIn(c), event: func(reason, msg string) {
		p.rt.Node.Event(pod, corev1.EventTypeWarning, reason, "%s", msg)
	}}
}

// postStart runs c's postStart hook beside it; a failed hook kills the
// container, which then restarts by the pod's policy, as in kubelet
// (which, unlike here, also holds the container's Running state and the
// next container until the hook is done).
func (p *Pod) postStart(ctx context.Context, c *Container) {
	lc := c.Spec.Lifecycle
	if lc == nil || lc.PostStart == nil {
		return
	}
	sp, proc, grace := p.stopPlan(c), c.proc, GracePeriod(p.pod, nil)
	go func() {
		ok, msg := prober.RunHook(ctx, lc.PostStart, sp.spec, sp.podIP, sp.exec, grace)
		if !ok && ctx.Err() == nil {
			sp.event("FailedPostStartHook", "PostStartHook failed: "+msg)
			proc.Stop(hookGraceExtension)
		}
	}()
}

// Kill stops c beside the worker, its preStop hook first, within the
// pod's grace period (a failed liveness probe); its exit comes out of
// Exits.
func (p *Pod) Kill(c *Container) {
	go p.stopPlan(c).stop(c.proc.Stop, GracePeriod(p.pod, nil))
}

// Exited records e and returns its container, or nil when e ends a start
// that is no longer the container's current one.
func (p *Pod) Exited(e Exit) (c *Container, code int) {
	if e.c.Gen != e.gen {
		return nil, 0
	}
	e.c.exited(e.code, e.at)
	p.Publish()
	return e.c, e.code
}

// Terminate stops every container (SIGTERM, then SIGKILL after grace)
// and records their exits. The probes' verdicts meanwhile go to
// onProbe, as kubelet keeps probing a terminating pod: a server that
// fails its readiness at SIGTERM is seen unready while it drains.
func (p *Pod) Terminate(grace time.Duration, onProbe func(prober.Result)) {
	var wg sync.WaitGroup
	for _, c := range p.containers {
		if c.proc == nil {
			continue
		}
		c.Killing = true
		p.event(corev1.EventTypeNormal, "Killing", "Stopping container %s", c.Spec.Name)
		wg.Add(1)
		go func(sp stopPlan, proc *runtime.Process) { defer wg.Done(); sp.stop(proc.Stop, grace) }(p.stopPlan(c), c.proc)
	}
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	for waiting := true; waiting; {
		select {
		case <-stopped:
			waiting = false
		case r := <-p.probes:
			onProbe(r)
		}
	}
	// Each stopped process reports its exit; record them all.
	for _, c := range p.containers {
		for c.proc != nil {
			e := <-p.exits
			if e.c.Gen == e.gen && e.c.proc != nil {
				e.c.exited(e.code, e.at)
			}
		}
	}
	p.stopInit()
}
