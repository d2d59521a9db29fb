package core

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateContainerRestartPolicy(t *testing.T) {
	policy := func(p corev1.ContainerRestartPolicy) *corev1.ContainerRestartPolicy { return &p }
	cases := []struct {
		name          string
		init, regular *corev1.ContainerRestartPolicy
		want          string // "" for valid
	}{
		{"none", nil, nil, ""},
		{"sidecar", policy(corev1.ContainerRestartPolicyAlways), nil, ""},
		{"init container restarted on failure", policy("OnFailure"), nil, `spec.initContainers[0].restartPolicy: Unsupported value: "OnFailure"`},
		{"regular container", nil, policy(corev1.ContainerRestartPolicyAlways), "spec.containers[0].restartPolicy: Forbidden"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := &corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "i", Image: "busybox", RestartPolicy: tc.init}},
				Containers:     []corev1.Container{{Name: "c", Image: "busybox", RestartPolicy: tc.regular}},
			}
			errs := ValidatePodSpec(spec, field.NewPath("spec"))
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("refused: %v", errs)
			case tc.want != "" && !strings.Contains(errs.ToAggregate().Error(), tc.want):
				t.Errorf("errors %v, want %q", errs, tc.want)
			}
		})
	}
}
