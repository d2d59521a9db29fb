package node

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/node/podstate"
)

// phase applies kubelet's rules to the containers' states.
func (w *podWorker) phase() corev1.PodPhase { return w.state.Phase(w.pod.Spec.RestartPolicy) }

// status is the pod status the worker reports.
func (w *podWorker) status() corev1.PodStatus {
	in := podstate.StatusInput{Pod: w.pod, NodeIP: w.a.cfg.NodeIP, PodIP: w.ip, StartTime: w.startTime,
		SandboxErr: w.sandboxErr, Now: metav1.Now()}
	if w.pushed != nil {
		in.Previous = w.pushed.Conditions
	}
	return w.state.Status(in)
}
