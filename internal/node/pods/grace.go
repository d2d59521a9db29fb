package pods

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// defaultGracePeriod is the API's default terminationGracePeriodSeconds,
// for a pod that reaches the agent without one.
const defaultGracePeriod = 30 * time.Second

// GracePeriod is how long the containers of pod get between SIGTERM and
// SIGKILL, by kubelet's rule (calculateEffectiveGracePeriod and
// killContainer): a pod being deleted gets the deletion's grace period
// (DeletionGracePeriodSeconds, which the API server computed from the
// request and the spec); any other stop (its regular containers are
// done, a failed liveness probe or postStart hook, a forced removal from
// the API) gets the spec's terminationGracePeriodSeconds; a pod with
// neither gets the API's default of 30 s. override, when set, can only
// shorten it, as an eviction does. DeletionGracePeriodSeconds is set
// only together with the DeletionTimestamp, so the pod alone says which
// case applies: every stop computes its grace here, so that two stops of
// one pod never disagree on it.
func GracePeriod(pod *corev1.Pod, override *time.Duration) time.Duration {
	grace := defaultGracePeriod
	switch {
	case pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil:
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	if override != nil && *override < grace {
		grace = *override
	}
	return max(grace, 0)
}
