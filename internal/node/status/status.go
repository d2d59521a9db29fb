// Package status computes the status a node reports for its pods and
// writes it to the API (kubelet's status manager). Compute and
// NeedsWrite are pure; a Reporter keeps what it last wrote for one pod.
package status

import (
	"context"
	"encoding/json"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/node/podstate"
)

// Input is what a pod's status is computed from: the pod worker's view.
type Input struct {
	Pod        *corev1.Pod   // the API's copy: spec, previous status
	State      *podstate.Pod // its containers
	NodeIP     netip.Addr
	PodIP      netip.Addr // invalid while there is no sandbox
	SandboxErr string     // why the sandbox is not there ("" when it is)
	StartTime  metav1.Time
	// Reported is the status last written (nil: none yet), whose
	// conditions keep their transition times while their status does.
	Reported *corev1.PodStatus
	Now      metav1.Time
}

// Compute is the status the node reports for a pod: kubelet's rules
// (podstate) applied to its containers and its sandbox.
func Compute(in Input) corev1.PodStatus {
	si := podstate.StatusInput{Pod: in.Pod, NodeIP: in.NodeIP, PodIP: in.PodIP, StartTime: in.StartTime,
		SandboxErr: in.SandboxErr, Now: in.Now}
	if in.Reported != nil {
		si.Previous = in.Reported.Conditions
	}
	return in.State.Status(si)
}

// NeedsWrite reports whether st must be written: it differs from what
// was reported, or the API's copy (api) says otherwise about its
// conditions. The node lifecycle controller marks the pods of a node it
// has not heard from not ready, and an agent that was only cut off must
// put them back, as kubelet's status manager does.
func NeedsWrite(st corev1.PodStatus, reported *corev1.PodStatus, api corev1.PodStatus) bool {
	return reported == nil || !apiequality.Semantic.DeepEqual(st, *reported) || !podstate.SameConditions(st, api)
}

// Reporter writes one pod's status.
type Reporter struct {
	Client   kubernetes.Interface
	reported *corev1.PodStatus
}

// Reported is the status last written, nil before the first.
func (r *Reporter) Reported() *corev1.PodStatus { return r.reported }

// Write patches pod's status to st when NeedsWrite says so. It returns
// the errors worth telling: not a pod gone from the API, nor a write
// cut short by ctx.
func (r *Reporter) Write(ctx context.Context, pod *corev1.Pod, st corev1.PodStatus) error {
	if !NeedsWrite(st, r.reported, pod.Status) {
		return nil
	}
	// The uid makes the patch fail on a pod recreated under the name.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID}, "status": st})
	if err != nil {
		return err
	}
	_, err = r.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		if apierrors.IsNotFound(err) || ctx.Err() != nil {
			return nil
		}
		return err
	}
	r.reported = &st
	return nil
}
