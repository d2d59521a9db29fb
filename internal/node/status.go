package node

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// phase applies kubelet's rules to the containers' states.
func (w *podWorker) phase() corev1.PodPhase {
	policy := w.pod.Spec.RestartPolicy
	var initFailed bool
	for _, c := range w.containers {
		if !c.init {
			continue
		}
		if t := c.state.Terminated; t != nil && t.ExitCode != 0 && policy == corev1.RestartPolicyNever {
			initFailed = true
		}
		if !c.succeeded() {
			if initFailed {
				return corev1.PodFailed
			}
			return corev1.PodPending
		}
	}
	var running, waiting, succeeded, failed int
	for _, c := range w.containers {
		if c.init {
			continue
		}
		switch {
		case c.running():
			running++
		case c.state.Terminated != nil:
			if c.state.Terminated.ExitCode == 0 {
				succeeded++
			} else {
				failed++
			}
		case c.last.Terminated != nil:
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

// status is the pod status the worker reports.
func (w *podWorker) status() corev1.PodStatus {
	phase := w.phase()
	st := corev1.PodStatus{
		Phase:     phase,
		HostIP:    w.a.cfg.NodeIP.String(),
		HostIPs:   []corev1.HostIP{{IP: w.a.cfg.NodeIP.String()}},
		StartTime: &w.startTime,
		QOSClass:  w.pod.Status.QOSClass,
	}
	if w.ip.IsValid() {
		st.PodIP = w.ip.String()
		st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
	} else if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		st.PodIP, st.PodIPs = w.pod.Status.PodIP, w.pod.Status.PodIPs
	}
	initialized, ready := true, true
	images := map[string]string{}
	for _, c := range w.pod.Spec.InitContainers {
		images[c.Name] = c.Image
	}
	for _, c := range w.pod.Spec.Containers {
		images[c.Name] = c.Image
	}
	for _, c := range w.containers {
		cs := c.status(images[c.spec.Name])
		if c.init {
			if !c.succeeded() {
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
	if w.sandboxErr != "" {
		ready = false
	}
	readyForGates := ready
	for _, g := range w.pod.Spec.ReadinessGates {
		if !conditionTrue(w.pod.Status.Conditions, g.ConditionType) {
			readyForGates = false
		}
	}
	cond := func(t corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason}
		if ok {
			c.Status, c.Reason = corev1.ConditionTrue, ""
		}
		// The transition time stays unless the status changes.
		previous := w.pod.Status.Conditions
		if w.pushed != nil {
			previous = w.pushed.Conditions
		}
		for _, old := range previous {
			if old.Type == t && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = metav1.Now()
		}
		return c
	}
	notReady := "ContainersNotReady"
	if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		notReady = "PodCompleted"
	}
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, w.ip.IsValid() || phase == corev1.PodSucceeded || phase == corev1.PodFailed, ""),
		cond(corev1.PodInitialized, initialized, "ContainersNotInitialized"),
		cond(corev1.ContainersReady, ready, notReady),
		cond(corev1.PodReady, readyForGates, notReady),
	}
	scheduled := false
	for _, old := range w.pod.Status.Conditions {
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

func isKubeletCondition(t corev1.PodConditionType) bool {
	switch t {
	case corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady:
		return true
	}
	return false
}

func conditionTrue(conds []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
