// Package podstate is the node agent's pod state machine, apart from the
// processes and goroutines that drive it (as kubelet keeps its status
// manager and pod workers apart from the runtime): each container's
// state, restarts and back-off, probe verdicts, which containers are due
// to start, and the pod's phase, conditions and status as kubelet
// computes them. Everything here is pure and tested without root; the
// caller supplies the clock.
package podstate

import (
	"cmp"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/restart"
)

// ProbeKind names what a probe result is about.
type ProbeKind string

// Kinds of probe results.
const (
	Readiness ProbeKind = "Readiness"
	Liveness  ProbeKind = "Liveness"
	Startup   ProbeKind = "Startup"
	// Listening is svcnet's implicit readiness of a container without a
	// readiness probe: its declared TCP ports accept connections.
	Listening ProbeKind = "Listening"
)

// Container is what the agent knows of one container of a pod.
type Container struct {
	Spec corev1.Container
	Init bool
	// Gen counts starts; probe results and exits carry the one they
	// belong to, so late news of an earlier start is ignored.
	Gen       int
	Restarts  int32
	State     corev1.ContainerState
	Last      corev1.ContainerState
	NextStart time.Time // when a container in back-off is due
	// Killing: being stopped by the agent (liveness, termination), so its
	// exit is not a start error.
	Killing bool
	// ImageID is the imageID of an image from the image store that the
	// container runs (repo@sha256:…), as kubelet reports it; "" for a
	// built-in image, reported as svcnet://<image>.
	ImageID string

	running bool
	readyOK bool
	// initDone: a sidecar has started once, so the init containers after
	// it may run (its later restarts hold nothing up, as in kubelet).
	initDone  bool
	listening bool
	// startedOK is read by probe goroutines waiting for the startup probe.
	startedOK atomic.Bool
	backoff   *restart.Backoff
}

// NewContainer is a container not started yet.
func NewContainer(spec corev1.Container, init bool) *Container {
	return &Container{Spec: spec, Init: init, backoff: restart.Containers.New(),
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
}

// Sidecar reports whether it is a restartable init container
// (restartPolicy: Always): started in init order, then running beside the
// regular containers for the pod's life, restarted whatever it exits with.
func (c *Container) Sidecar() bool {
	return c.Init && c.Spec.RestartPolicy != nil && *c.Spec.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// setStarted records the startup verdict.
func (c *Container) setStarted(ok bool) {
	c.startedOK.Store(ok)
	if ok && c.running {
		c.initDone = true
	}
}

// Running reports whether its process runs.
func (c *Container) Running() bool { return c.running }

// StartedOK reports whether its startup probe (if any) has passed.
func (c *Container) StartedOK() bool { return c.startedOK.Load() }

// Ready is kubelet's notion (running, started, passing readiness), with
// svcnet's Listening in place of a readiness probe that is not there.
func (c *Container) Ready() bool {
	if !c.running || !c.startedOK.Load() {
		return false
	}
	if c.Spec.ReadinessProbe == nil {
		return c.listening
	}
	return c.readyOK
}

// NeedsListening reports whether the current start waits for its
// declared TCP ports before it is ready.
func (c *Container) NeedsListening() bool { return c.running && !c.listening }

// Succeeded reports whether it ran to completion with 0.
func (c *Container) Succeeded() bool {
	return c.State.Terminated != nil && c.State.Terminated.ExitCode == 0
}

// Waiting records why it cannot start, and when to try again.
func (c *Container) Waiting(reason, msg string, retryAt time.Time) {
	c.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	c.NextStart = retryAt
}

// Started records a new start of its process at at.
func (c *Container) Started(at time.Time) {
	if c.Gen > 0 {
		c.Restarts++
	}
	c.Gen++
	c.running, c.NextStart = true, time.Time{}
	c.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}
	c.setStarted(c.Spec.StartupProbe == nil)
	c.readyOK = false
	c.listening = c.Spec.ReadinessProbe != nil || len(TCPPorts(&c.Spec)) == 0
}

// Adopted records a start the agent did not see (made by an earlier run
// of the agent, whose container outlived it): start gen at at, with the
// readiness the API last had for it, so a restart of the agent does not
// take a serving container out of its Services.
func (c *Container) Adopted(at time.Time, gen int, was corev1.ContainerStatus) {
	c.Gen = gen
	c.running, c.NextStart = true, time.Time{}
	c.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}
	// Only what the API said of this very start counts: the agent may
	// have died before reporting it, and the last report was of the one
	// before.
	same := was.ContainerID == c.ID() && was.State.Running != nil
	c.setStarted(c.Spec.StartupProbe == nil || (same && was.Started != nil && *was.Started))
	c.readyOK = same && was.Ready
	c.listening = c.readyOK || c.Spec.ReadinessProbe != nil || len(TCPPorts(&c.Spec)) == 0
}

// Exited records the end of the current process (started at started).
func (c *Container) Exited(code int, started, now time.Time) {
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	// The pod-exec helper exits with 128 when it cannot start the command.
	if code == 128 && now.Sub(started) < 2*time.Second && !c.Killing {
		reason = "StartError"
	}
	c.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: int32(code), Reason: reason, StartedAt: metav1.NewTime(started), FinishedAt: metav1.NewTime(now),
		ContainerID: c.ID(),
	}}
	c.running, c.readyOK, c.listening, c.Killing = false, false, false, false
	c.startedOK.Store(false)
	c.backoff.Exited(now.Sub(started))
}

// ShouldRestart applies the pod's restart policy to a finished container.
func (c *Container) ShouldRestart(policy corev1.RestartPolicy) bool {
	t := c.State.Terminated
	if t == nil {
		return false
	}
	if c.Sidecar() {
		return true
	}
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return t.ExitCode != 0
	}
	return !(c.Init && t.ExitCode == 0) // a finished init container is done
}

// ScheduleRestart moves a finished container into back-off.
func (c *Container) ScheduleRestart(pod string, now time.Time) {
	c.Last = c.State
	wait := c.backoff.Current()
	c.NextStart = now.Add(wait)
	c.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
		Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", wait, c.Spec.Name, pod)}}
}

// ProbeAction is what a probe result asks of the agent.
type ProbeAction int

const (
	// NoAction: the verdict is recorded.
	NoAction ProbeAction = iota
	// Kill: the liveness probe failed; stop the container (it restarts
	// by the pod's policy).
	Kill
)

// Probe records a probe verdict of start gen; stale ones are ignored.
func (c *Container) Probe(kind ProbeKind, ok bool, gen int) ProbeAction {
	if gen != c.Gen || !c.running {
		return NoAction
	}
	switch kind {
	case Readiness:
		c.readyOK = ok
	case Startup:
		c.setStarted(ok)
	case Listening:
		c.listening = ok
	case Liveness:
		if !ok && !c.Killing {
			c.Killing = true
			return Kill
		}
	}
	return NoAction
}

// ID is the container ID shown in its status.
func (c *Container) ID() string { return fmt.Sprintf("svcnet://%s-%d", c.Spec.Name, c.Gen) }

// Status is the container's status as kubelet reports it.
func (c *Container) Status(image string) corev1.ContainerStatus {
	started := c.running && c.startedOK.Load()
	st := corev1.ContainerStatus{
		Name: c.Spec.Name, Image: image, ImageID: cmp.Or(c.ImageID, "svcnet://"+image),
		State: c.State, LastTerminationState: c.Last, Ready: c.Ready(), RestartCount: c.Restarts,
		Started: &started,
	}
	if c.Gen > 0 {
		st.ContainerID = c.ID()
	}
	return st
}

// TCPPorts are the container's declared TCP ports.
func TCPPorts(c *corev1.Container) []int32 {
	var out []int32
	for _, p := range c.Ports {
		if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
			out = append(out, p.ContainerPort)
		}
	}
	return out
}
