package node

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/images"
	"github.com/svcnet/svcnet/internal/node/podstate"
)

// unpullable fails a pod of no controller that names an image svcnet
// does not have: no image ever appears on svcnet (they are built in), so
// waiting in ImagePullBackOff as kubelet does would only make `kubectl
// run -it --image=…` time out after a minute instead of saying why at
// once. A controller's pods wait as in Kubernetes: failing them would
// have the controller replace them in a loop.
func unpullable(pod *corev1.Pod) *podstate.Rejection {
	if metav1.GetControllerOf(pod) != nil {
		return nil
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if _, ok := images.Lookup(c.Image); !ok {
			return &podstate.Rejection{Reason: "ErrImagePull",
				Message: fmt.Sprintf("container %s: %v", c.Name, images.ErrNotBuiltin(c.Image))}
		}
	}
	return nil
}
