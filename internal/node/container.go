package node

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/node/runtime"
)

// Restart back-off, as kubelet's: 10 s doubling up to 5 min, reset after
// 10 min of running.
const (
	backoffInitial = 10 * time.Second
	backoffMax     = 5 * time.Minute
	backoffReset   = 10 * time.Minute
)

// container is what a pod worker knows of one of its containers.
type container struct {
	spec      corev1.Container
	init      bool
	gen       int // incremented on each start; probe results carry it
	proc      *runtime.Process
	stopProbe context.CancelFunc
	restarts  int32
	state     corev1.ContainerState
	last      corev1.ContainerState
	// probe verdicts of the current start; probe goroutines read startedOK
	readyOK bool
	// listening: without a readiness probe, the container's declared TCP
	// ports accept connections (or the wait for them is over)
	listening bool
	startedOK atomic.Bool
	backoff   time.Duration
	nextStart time.Time
	logPath   string
	env       []string // of the current start, for exec
	killing   bool     // stopped by us (liveness, termination)
}

func newContainer(spec corev1.Container, init bool) *container {
	return &container{spec: spec, init: init,
		state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
}

func (c *container) running() bool { return c.proc != nil }

// ready is kubelet's notion: running, started, and passing readiness.
func (c *container) ready() bool {
	if !c.running() || !c.startedOK.Load() {
		return false
	}
	if c.spec.ReadinessProbe == nil {
		return c.listening
	}
	return c.readyOK
}

// succeeded reports whether the container ran to completion with 0.
func (c *container) succeeded() bool {
	return c.state.Terminated != nil && c.state.Terminated.ExitCode == 0
}

// exited records the end of the current process.
func (c *container) exited(code int, started time.Time) {
	now := metav1.Now()
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	// The pod-exec helper exits with 128 when it cannot start the command.
	if code == 128 && now.Sub(started) < 2*time.Second && !c.killing {
		reason = "StartError"
	}
	c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: int32(code), Reason: reason, StartedAt: metav1.NewTime(started), FinishedAt: now,
		ContainerID: c.id(),
	}}
	if c.stopProbe != nil {
		c.stopProbe()
	}
	c.proc, c.readyOK, c.listening, c.killing = nil, false, false, false
	c.startedOK.Store(false)
	// Back-off grows with each failure, and resets after a long run.
	switch {
	case now.Sub(started) >= backoffReset || c.backoff == 0:
		c.backoff = backoffInitial
	default:
		c.backoff = min(c.backoff*2, backoffMax)
	}
}

// shouldRestart applies the pod's restart policy to a finished container.
func (c *container) shouldRestart(policy corev1.RestartPolicy) bool {
	t := c.state.Terminated
	if t == nil {
		return false
	}
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return t.ExitCode != 0
	}
	return !(c.init && t.ExitCode == 0) // a finished init container is done
}

// scheduleRestart moves a finished container into back-off.
func (c *container) scheduleRestart(pod string) {
	c.last = c.state
	c.nextStart = time.Now().Add(c.backoff)
	c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
		Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", c.backoff, c.spec.Name, pod)}}
}

func (c *container) id() string { return fmt.Sprintf("svcnet://%s-%d", c.spec.Name, c.gen) }

func (c *container) status(image string) corev1.ContainerStatus {
	st := corev1.ContainerStatus{
		Name: c.spec.Name, Image: image, ImageID: "svcnet://" + image,
		State: c.state, LastTerminationState: c.last, Ready: c.ready(), RestartCount: c.restarts,
		Started: ptrBool(c.running() && c.startedOK.Load()),
	}
	if c.gen > 0 {
		st.ContainerID = c.id()
	}
	return st
}
