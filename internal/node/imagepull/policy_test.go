package imagepull

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPolicy(t *testing.T) {
	const digest = "@sha256:0123456789012345678901234567890123456789012345678901234567890123"
	for _, tc := range []struct {
		image string
		set   corev1.PullPolicy
		want  corev1.PullPolicy
	}{
		{"nginx", "", corev1.PullAlways},
		{"nginx:latest", "", corev1.PullAlways},
		{"nginx:1.27", "", corev1.PullIfNotPresent},
		{"localhost:5000/app", "", corev1.PullAlways},
		{"localhost:5000/app:v1", "", corev1.PullIfNotPresent},
		{"nginx" + digest, "", corev1.PullIfNotPresent},
		{"nginx:latest" + digest, "", corev1.PullIfNotPresent},
		{"nginx:1.27", corev1.PullAlways, corev1.PullAlways},
		{"nginx", corev1.PullNever, corev1.PullNever},
		{"Not Valid", "", corev1.PullAlways},
	} {
		if got := Policy(&corev1.Container{Image: tc.image, ImagePullPolicy: tc.set}); got != tc.want {
			t.Errorf("Policy(%q, %q) = %s, want %s", tc.image, tc.set, got, tc.want)
		}
	}
}

// TestDecide is kubelet's table: policy × image present or not, for an
// image by tag and by digest (the default policy differs; the decision
// given the policy does not).
func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		image   string
		policy  corev1.PullPolicy // "" : defaulted
		present bool
		want    Action
	}{
		{"app:v1", corev1.PullAlways, true, Pull},
		{"app:v1", corev1.PullAlways, false, Pull},
		{"app:v1", corev1.PullIfNotPresent, true, Use},
		{"app:v1", corev1.PullIfNotPresent, false, Pull},
		{"app:v1", corev1.PullNever, true, Use},
		{"app:v1", corev1.PullNever, false, NeverPull},
		{"app:v1", "", true, Use},
		{"app:v1", "", false, Pull},
		{"app", "", true, Pull},
		{"app:latest", "", true, Pull},
		{"app@sha256:0123456789012345678901234567890123456789012345678901234567890123", "", true, Use},
		{"app@sha256:0123456789012345678901234567890123456789012345678901234567890123", "", false, Pull},
		{"app@sha256:0123456789012345678901234567890123456789012345678901234567890123", corev1.PullNever, false, NeverPull},
		{"app@sha256:0123456789012345678901234567890123456789012345678901234567890123", corev1.PullAlways, true, Pull},
	} {
		c := &corev1.Container{Image: tc.image, ImagePullPolicy: tc.policy}
		if got := Decide(Policy(c), tc.present); got != tc.want {
			t.Errorf("%s, policy %q, present %v: %v, want %v", tc.image, tc.policy, tc.present, got, tc.want)
		}
	}
}
