package apiserver

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The repair's tokens live in an annotation of the node-port record:
// written and read back as they were, gone when there are none, and an
// annotation that does not parse reads as none.
func TestNodePortSuspects(t *testing.T) {
	for _, c := range []struct {
		name   string
		tokens map[int]string
	}{
		{"none", map[int]string{}},
		{"some", map[int]string{30030: "k2x9", 32767: "0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ra := &corev1.RangeAllocation{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"other": "kept"}}}
			setSuspects(ra, c.tokens)
			if got := suspects(ra); !maps.Equal(got, c.tokens) {
				t.Errorf("read back %v, want %v", got, c.tokens)
			}
			if _, ok := ra.Annotations[suspectsAnnotation]; ok != (len(c.tokens) > 0) {
				t.Errorf("annotations %v", ra.Annotations)
			}
			if ra.Annotations["other"] != "kept" {
				t.Errorf("another annotation was lost: %v", ra.Annotations)
			}
		})
	}
	for _, bad := range []string{"", "{", `{"x":"y"}`, `[1]`} {
		ra := &corev1.RangeAllocation{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{suspectsAnnotation: bad}}}
		if got := suspects(ra); got == nil || len(got) != 0 {
			t.Errorf("%q read as %v, want no tokens", bad, got)
		}
	}
	if got := suspects(&corev1.RangeAllocation{}); got == nil || len(got) != 0 {
		t.Errorf("no annotation read as %v, want an empty map", got)
	}
}
