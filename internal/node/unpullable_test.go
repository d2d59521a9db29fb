package node

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/node/podstate"
)

func TestUnpullable(t *testing.T) {
	owned := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u", Controller: ptr.To(true)}}
	for _, tc := range []struct {
		name   string
		owners []metav1.OwnerReference
		images []string
		init   string
		pulls  bool   // the node has an image store
		reason string // "": not rejected
		want   string // in the message
	}{
		{"built-in images", nil, []string{"busybox", "registry.k8s.io/e2e-test-images/agnhost:2.66.1"}, "", false, "", ""},
		{"built-in images, with a store", nil, []string{"busybox"}, "", true, "", ""},
		{"no store: an unknown image", nil, []string{"busybox", "httpd:2.4"}, "", false, "ErrImagePull", `image "httpd:2.4" is not built into svcnet`},
		{"no store: an unknown init container image", nil, []string{"busybox"}, "alpine", false, "ErrImagePull", `container init: image "alpine"`},
		{"a store: a well-formed name is pulled", nil, []string{"busybox", "httpd:2.4"}, "alpine", true, "", ""},
		{"an invalid name", nil, []string{"busybox", "Not/A:Valid:Name"}, "", true, "InvalidImageName", `container b: couldn't parse image name "Not/A:Valid:Name"`},
		{"an invalid init name, no store", nil, []string{"busybox"}, "UPPER", false, "InvalidImageName", "container init"},
		{"a controller's pod waits instead", owned, []string{"httpd"}, "", false, "", ""},
		{"a controller's pod with an invalid name waits", owned, []string{"a b"}, "", true, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: tc.owners}}
			for i, img := range tc.images {
				pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Image: img})
			}
			if tc.init != "" {
				pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: tc.init}}
			}
			w := &podWorker{pod: pod, state: podstate.New(pod)}
			w.reject(unpullable(pod, tc.pulls))
			r := w.state.Rejected
			switch {
			case tc.reason == "" && r != nil:
				t.Errorf("rejected: %+v", r)
			case tc.reason != "" && (r == nil || r.Reason != tc.reason || !strings.Contains(r.Message, tc.want)):
				t.Errorf("rejection %+v, want %s with %q", r, tc.reason, tc.want)
			case tc.reason != "":
				// The container that failed it says why.
				name := strings.TrimSuffix(strings.Fields(r.Message)[1], ":")
				c := w.state.Container(name)
				if c == nil || c.State.Waiting == nil || c.State.Waiting.Reason != tc.reason || !strings.Contains(r.Message, c.State.Waiting.Message) {
					t.Errorf("container %s: state %+v, want waiting in %s", name, c, tc.reason)
				}
			}
		})
	}
}
