package apis

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestDefaultServiceAffinity: ClientIP gets kube-apiserver's default
// timeout; None drops whatever configuration was left (an update that
// switches affinity off keeps the old config otherwise, and is refused).
func TestDefaultServiceAffinity(t *testing.T) {
	cfg := &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
	for _, tc := range []struct {
		name     string
		affinity corev1.ServiceAffinity
		config   *corev1.SessionAffinityConfig
		want     *int32 // timeout; nil: no config
	}{
		{"unset", "", nil, nil},
		{"None with a config left over", corev1.ServiceAffinityNone, cfg, nil},
		{"ClientIP defaulted", corev1.ServiceAffinityClientIP, nil, ptr.To(corev1.DefaultClientIPServiceAffinitySeconds)},
		{"ClientIP kept", corev1.ServiceAffinityClientIP, cfg, ptr.To[int32](60)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &corev1.Service{Spec: corev1.ServiceSpec{SessionAffinity: tc.affinity, SessionAffinityConfig: tc.config.DeepCopy()}}
			DefaultService(s)
			var got *int32
			if c := s.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil {
				got = c.ClientIP.TimeoutSeconds
			}
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) || (tc.want == nil && s.Spec.SessionAffinityConfig != nil) {
				t.Errorf("config %+v, want timeout %v", s.Spec.SessionAffinityConfig, tc.want)
			}
		})
	}
}
