package podendpoint

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestFindPort(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "setup", Ports: []corev1.ContainerPort{{Name: "setup", ContainerPort: 7000}}},
			{Name: "proxy", RestartPolicy: &always, Ports: []corev1.ContainerPort{{Name: "proxy", ContainerPort: 8080}}},
		},
		Containers: []corev1.Container{{Name: "app", Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: 80}, {Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
		}}},
	}}
	cases := []struct {
		name   string
		target intstr.IntOrString
		proto  corev1.Protocol
		want   int32 // 0: an error
	}{
		{"number", intstr.FromInt32(9376), corev1.ProtocolTCP, 9376},
		{"none: the service port", intstr.IntOrString{}, corev1.ProtocolTCP, 443},
		{"name", intstr.FromString("http"), corev1.ProtocolTCP, 80},
		{"name of another protocol", intstr.FromString("dns"), corev1.ProtocolTCP, 0},
		{"name of a sidecar's port", intstr.FromString("proxy"), corev1.ProtocolTCP, 8080},
		{"name of an init container's port", intstr.FromString("setup"), corev1.ProtocolTCP, 0},
		{"unknown name", intstr.FromString("nope"), corev1.ProtocolTCP, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FindPort(pod, &corev1.ServicePort{Port: 443, TargetPort: tc.target, Protocol: tc.proto})
			if tc.want == 0 {
				if err == nil {
					t.Errorf("port %d, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("port %d (%v), want %d", got, err, tc.want)
			}
		})
	}
}
