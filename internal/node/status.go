package node

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/node/podstate"
)

// phase applies kubelet's rules to the containers' states.
func (w *podWorker) phase() corev1.PodPhase { return w.state.Phase(w.pod.Spec.RestartPolicy) }

// status is the pod status the worker reports.
func (w *podWorker) status() corev1.PodStatus {
	in := podstate.StatusInput{Pod: w.pod, NodeIP: w.a.cfg.NodeIP, PodIP: w.sb.IP(), StartTime: w.startTime,
		SandboxErr: w.sb.SandboxErr(), Now: metav1.Now()}
	if w.pushed != nil {
		in.Previous = w.pushed.Conditions
	}
	return w.state.Status(in)
}

// push writes the pod's status when it changed, or when the API's copy
// says otherwise: the node lifecycle controller marks the pods of a node
// it has not heard from not ready, and an agent that was only cut off
// must put them back, as kubelet's status manager does.
func (w *podWorker) push(ctx context.Context) {
	st := w.status()
	if w.pushed != nil && apiequality.Semantic.DeepEqual(st, *w.pushed) && podstate.SameConditions(st, w.pod.Status) {
		return
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": w.uid}, "status": st})
	if err != nil {
		return
	}
	_, err = w.a.client.CoreV1().Pods(w.pod.Namespace).Patch(ctx, w.pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			w.log().Warn("pod status", "err", err)
		}
		return
	}
	w.pushed = &st
}
