package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestAs(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	tests := []struct {
		name string
		obj  any
		want *corev1.Pod
	}{
		{"object", pod, pod},
		{"tombstone", cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod}, pod},
		{"other type", &corev1.Service{}, nil},
		{"tombstone of other type", cache.DeletedFinalStateUnknown{Key: "ns/s", Obj: &corev1.Service{}}, nil},
		{"nil", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := As[*corev1.Pod](tt.obj)
			if ok != (tt.want != nil) || got != tt.want {
				t.Fatalf("As = %v, %v; want %v", got, ok, tt.want)
			}
		})
	}
}
