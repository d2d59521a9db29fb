package podstate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestSameConditions(t *testing.T) {
	conds := func(ready, scheduled corev1.ConditionStatus) corev1.PodStatus {
		st := corev1.PodStatus{}
		if ready != "" {
			st.Conditions = append(st.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: ready})
		}
		if scheduled != "" {
			st.Conditions = append(st.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: scheduled})
		}
		return st
	}
	cases := []struct {
		name     string
		ours     corev1.PodStatus
		api      corev1.PodStatus
		wantSame bool
	}{
		{"equal", conds("True", "True"), conds("True", "True"), true},
		{"marked not ready by the node lifecycle controller", conds("True", "True"), conds("False", "True"), false},
		{"the API lacks one", conds("True", "True"), conds("", "True"), false},
		{"the API has more", conds("True", ""), conds("True", "True"), true},
		{"nothing to compare", corev1.PodStatus{}, conds("False", ""), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := SameConditions(tc.ours, tc.api); got != tc.wantSame {
				t.Errorf("SameConditions = %v, want %v", got, tc.wantSame)
			}
		})
	}
}
