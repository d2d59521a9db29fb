package node

import (
	"fmt"
	"slices"

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
func unpullable(pod *corev1.Pod, pulls bool) *podstate.Rejection {
	if metav1.GetControllerOf(pod) != nil {
		return nil
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if _, ok := images.Lookup(c.Image); ok {
			continue
		}
		if _, err := name.ParseReference(c.Image); err != nil {
			return &podstate.Rejection{Reason: "InvalidImageName",
				Message: fmt.Sprintf("container %s: couldn't parse image name %q: %v", c.Name, c.Image, err)}
		}
		if !pulls {
			return &podstate.Rejection{Reason: "ErrImagePull",
				Message: fmt.Sprintf("container %s: %v", c.Name, images.ErrNotBuiltin(c.Image))}
		}
	}
	return nil
}
