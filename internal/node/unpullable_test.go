package node

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestUnpullable(t *testing.T) {
	owned := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u", Controller: ptr.To(true)}}
	for _, tc := range []struct {
		name   string
		owners []metav1.OwnerReference
		images []string
		init   string
		want   string // "" : not rejected; else in the message
	}{
		{"built-in images", nil, []string{"busybox", "registry.k8s.io/e2e-test-images/agnhost:2.66.1"}, "", ""},
		{"a bare pod with an unknown image", nil, []string{"busybox", "httpd:2.4"}, "", `image "httpd:2.4" is not built into svcnet`},
		{"an unknown init container image", nil, []string{"busybox"}, "alpine", `container init: image "alpine"`},
		{"a controller's pod waits instead", owned, []string{"httpd"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: tc.owners}}
			for i, img := range tc.images {
				pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Image: img})
			}
			if tc.init != "" {
				pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: tc.init}}
			}
			r := unpullable(pod)
			switch {
			case tc.want == "" && r != nil:
				t.Errorf("rejected: %+v", r)
			case tc.want != "" && (r == nil || r.Reason != "ErrImagePull" || !strings.Contains(r.Message, tc.want)):
				t.Errorf("rejection %+v, want ErrImagePull with %q", r, tc.want)
			}
		})
	}
}
