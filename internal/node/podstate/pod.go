package podstate

import (
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pod is the state of one pod's containers: init containers first, in
// order, then the others.
type Pod struct {
	Containers []*Container
	// Rejected, when set, fails the pod as a whole (kubelet's admission
	// rejections): phase Failed with this reason and message.
	Rejected *Rejection
}

// Rejection is why a pod failed without its containers running.
type Rejection struct {
	Reason, Message string
}

// New is the state of pod as the agent first sees it: its containers not
// started, their restart counts continuing what its status reported (a
// restarted agent keeps counting).
func New(pod *corev1.Pod) *Pod {
	p := &Pod{}
	for _, c := range pod.Spec.InitContainers {
		p.Containers = append(p.Containers, NewContainer(c, true))
	}
	for _, c := range pod.Spec.Containers {
		p.Containers = append(p.Containers, NewContainer(c, false))
	}
	for _, st := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if c := p.Container(st.Name); c != nil {
			c.Restarts = st.RestartCount
		}
	}
	return p
}

// Container finds a container by name.
func (p *Pod) Container(name string) *Container {
	for _, c := range p.Containers {
		if c.Spec.Name == name {
			return c
		}
	}
	return nil
}

// Due lists the containers to start now: the first unfinished init
// container (each runs to completion before the next; a sidecar only
// until it has started), else every regular container and sidecar that
// is neither running, in back-off, nor finished for good by the restart
// policy.
func (p *Pod) Due(policy corev1.RestartPolicy, now time.Time) []*Container {
	for _, c := range p.Containers {
		if c.Sidecar() {
			if c.initDone {
				continue
			}
			if !c.running && !now.Before(c.NextStart) {
				return []*Container{c}
			}
			return nil // the next waits for this one to have started
		}
		if !c.Init || c.Succeeded() {
			continue
		}
		if !c.running && !now.Before(c.NextStart) && (c.State.Terminated == nil || c.ShouldRestart(policy)) {
			return []*Container{c}
		}
		return nil // the next waits for this one
	}
	var due []*Container
	for _, c := range p.Containers {
		if (c.Init && !c.Sidecar()) || c.running || now.Before(c.NextStart) {
			continue
		}
		if c.State.Terminated != nil && !c.ShouldRestart(policy) {
			continue
		}
		due = append(due, c)
	}
	return due
}

// NextWake is how long until a container in back-off is due (a minute at
// most; 2 s while the sandbox is failing).
func (p *Pod) NextWake(now time.Time, sandboxFailing bool) time.Duration {
	wake := time.Minute
	for _, c := range p.Containers {
		if !c.running && !c.NextStart.IsZero() {
			wake = min(wake, max(c.NextStart.Sub(now), 10*time.Millisecond))
		}
	}
	if sandboxFailing {
		wake = min(wake, 2*time.Second)
	}
	return wake
}

// Phase applies kubelet's rules to the containers' states.
func (p *Pod) Phase(policy corev1.RestartPolicy) corev1.PodPhase {
	if p.Rejected != nil {
		return corev1.PodFailed
	}
	var initFailed bool
	for _, c := range p.Containers {
		if !c.Init {
			continue
		}
		if c.Sidecar() {
			// Sidecars never finish: started once is initialized, and
			// they count for nothing in the phase after that.
			if !c.initDone {
				return corev1.PodPending
			}
			continue
		}
		if t := c.State.Terminated; t != nil && t.ExitCode != 0 && policy == corev1.RestartPolicyNever {
			initFailed = true
		}
		if !c.Succeeded() {
			if initFailed {
				return corev1.PodFailed
			}
			return corev1.PodPending
		}
	}
	var running, waiting, succeeded, failed int
	for _, c := range p.Containers {
		if c.Init {
			continue
		}
		switch {
		case c.running:
			running++
		case c.State.Terminated != nil:
			if c.State.Terminated.ExitCode == 0 {
				succeeded++
			} else {
				failed++
			}
		case c.Last.Terminated != nil:
			running++ // in back-off between restarts: still a running pod
		default:
			waiting++
		}
	}
	switch {
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case failed > 0 && policy != corev1.RestartPolicyAlways:
		return corev1.PodFailed
	case succeeded > 0 && policy != corev1.RestartPolicyAlways:
		return corev1.PodSucceeded
	}
	return corev1.PodRunning
}

// Terminal reports whether the phase is Succeeded or Failed.
func Terminal(ph corev1.PodPhase) bool { return ph == corev1.PodSucceeded || ph == corev1.PodFailed }

// StatusInput is what the pod's status needs besides its containers.
type StatusInput struct {
	Pod        *corev1.Pod // the API's copy: spec, previous status
	NodeIP     netip.Addr
	PodIP      netip.Addr // invalid while there is no sandbox
	StartTime  metav1.Time
	SandboxErr string
	// Previous are the conditions last reported (nil: the API's), whose
	// transition times stay while their status does.
	Previous []corev1.PodCondition
	Now      metav1.Time
}

// Status is the pod status kubelet would report.
func (p *Pod) Status(in StatusInput) corev1.PodStatus {
	phase := p.Phase(in.Pod.Spec.RestartPolicy)
	st := corev1.PodStatus{
		Phase:     phase,
		HostIP:    in.NodeIP.String(),
		HostIPs:   []corev1.HostIP{{IP: in.NodeIP.String()}},
		StartTime: &in.StartTime,
		QOSClass:  in.Pod.Status.QOSClass,
	}
	if p.Rejected != nil {
		st.Reason, st.Message = p.Rejected.Reason, p.Rejected.Message
	}
	if in.PodIP.IsValid() {
		st.PodIP = in.PodIP.String()
		st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
	} else if Terminal(phase) {
		st.PodIP, st.PodIPs = in.Pod.Status.PodIP, in.Pod.Status.PodIPs
	}
	initialized, ready := true, true
	images := map[string]string{}
	for _, c := range slices.Concat(in.Pod.Spec.InitContainers, in.Pod.Spec.Containers) {
		images[c.Name] = c.Image
	}
	for _, c := range p.Containers {
		cs := c.Status(images[c.Spec.Name])
		if c.Init {
			switch {
			case c.Sidecar():
				// Ready counts sidecars as kubelet does: the pod serves
				// with them.
				initialized = initialized && c.initDone
				ready = ready && cs.Ready
			case !c.Succeeded():
				initialized = false
			}
			st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
			continue
		}
		if !cs.Ready {
			ready = false
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	if in.SandboxErr != "" {
		ready = false
	}
	readyForGates := ready
	for _, g := range in.Pod.Spec.ReadinessGates {
		if !ConditionTrue(in.Pod.Status.Conditions, g.ConditionType) {
			readyForGates = false
		}
	}
	previous := in.Previous
	if previous == nil {
		previous = in.Pod.Status.Conditions
	}
	cond := func(t corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason}
		if ok {
			c.Status, c.Reason = corev1.ConditionTrue, ""
		}
		// The transition time stays unless the status changes.
		for _, old := range previous {
			if old.Type == t && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = in.Now
		}
		return c
	}
	notReady := "ContainersNotReady"
	if Terminal(phase) {
		notReady = "PodCompleted"
	}
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, in.PodIP.IsValid() || Terminal(phase), ""),
		cond(corev1.PodInitialized, initialized, "ContainersNotInitialized"),
		cond(corev1.ContainersReady, ready, notReady),
		cond(corev1.PodReady, readyForGates, notReady),
	}
	scheduled := false
	for _, old := range in.Pod.Status.Conditions {
		if old.Type == corev1.PodScheduled {
			st.Conditions = append(st.Conditions, old)
			scheduled = true
		} else if !isKubeletCondition(old.Type) {
			st.Conditions = append(st.Conditions, old) // readiness gates and others
		}
	}
	if !scheduled {
		st.Conditions = append(st.Conditions, cond(corev1.PodScheduled, true, ""))
	}
	return st
}

// SameConditions reports whether b has every condition of a with the
// same status.
func SameConditions(a, b corev1.PodStatus) bool {
	for _, c := range a.Conditions {
		i := slices.IndexFunc(b.Conditions, func(o corev1.PodCondition) bool { return o.Type == c.Type })
		if i < 0 || b.Conditions[i].Status != c.Status {
			return false
		}
	}
	return true
}

func isKubeletCondition(t corev1.PodConditionType) bool {
	switch t {
	case corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady:
		return true
	}
	return false
}

// ConditionTrue reports whether condition t is True in conds.
func ConditionTrue(conds []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
