package core

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestDefaultTolerations(t *testing.T) {
	unreachable60 := corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](60)}
	cases := []struct {
		name string
		in   []corev1.Toleration
		want map[string]int64 // key -> seconds of its NoExecute toleration
		n    int
	}{
		{"none: both defaults", nil, map[string]int64{corev1.TaintNodeNotReady: 300, corev1.TaintNodeUnreachable: 300}, 2},
		{"own unreachable kept", []corev1.Toleration{unreachable60}, map[string]int64{corev1.TaintNodeNotReady: 300, corev1.TaintNodeUnreachable: 60}, 2},
		{"everything tolerated: nothing added", []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, map[string]int64{}, 1},
		{"an Equal toleration counts by key and effect", []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoExecute}},
			map[string]int64{corev1.TaintNodeNotReady: -1, corev1.TaintNodeUnreachable: 300}, 2},
		{"a NoSchedule toleration does not count", []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			map[string]int64{corev1.TaintNodeNotReady: 300, corev1.TaintNodeUnreachable: 300}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := DefaultTolerations(append([]corev1.Toleration(nil), tc.in...))
			if len(out) != tc.n {
				t.Fatalf("tolerations %+v", out)
			}
			got := map[string]int64{}
			for _, tol := range out {
				if tol.Effect == corev1.TaintEffectNoExecute && tol.Key != "" {
					got[tol.Key] = ptr.Deref(tol.TolerationSeconds, -1)
				}
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s: %d s, want %d", k, got[k], v)
				}
			}
		})
	}
}
