package node

import (
	"fmt"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/images"
	"github.com/svcnet/svcnet/internal/node/podstate"
)

// unpullable fails at once a pod of no controller that names an image
// svcnet can never run: one that is not built in and whose name does
// not parse (InvalidImageName), or, on a node without an image store
// (pulls is false), any image that is not built in. Waiting in a
// back-off as kubelet does would only make `kubectl run -it --image=…`
// time out after a minute instead of saying why at once. A well-formed
// name is pulled; how a failed pull ends such a pod is
// imagepull.FailsBarePod's. A controller's pods wait as in Kubernetes:
// failing them would have the controller replace them in a loop.
func unpullable(pod *corev1.Pod, pulls bool) *unpullableImage {
	if metav1.GetControllerOf(pod) != nil {
		return nil
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if _, ok := images.Lookup(c.Image); ok {
			continue
		}
		if _, err := name.ParseReference(c.Image); err != nil {
			return &unpullableImage{container: c.Name, reason: "InvalidImageName",
				err: fmt.Errorf("couldn't parse image name %q: %w", c.Image, err)}
		}
		if !pulls {
			return &unpullableImage{container: c.Name, reason: "ErrImagePull", err: images.ErrNotBuiltin(c.Image)}
		}
	}
	return nil
}

// unpullableImage is the container whose image fails its pod, and why.
type unpullableImage struct {
	container, reason string
	err               error
}

// reject fails the pod for u: the pod's reason and message name the
// container, whose waiting state says why (the pod starts nothing, so
// no start attempt reports it).
func (w *podWorker) reject(u *unpullableImage) {
	if u == nil {
		return
	}
	w.state.Rejected = &podstate.Rejection{Reason: u.reason, Message: fmt.Sprintf("container %s: %v", u.container, u.err)}
	if c := w.state.Container(u.container); c != nil {
		c.Waiting(u.reason, u.err.Error(), time.Time{})
	}
}
