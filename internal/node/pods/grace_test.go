package pods

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestGracePeriod(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name     string
		deleted  bool
		deletion *int64
		spec     *int64
		override *time.Duration
		want     time.Duration
	}{
		{name: "neither: the API's default", want: 30 * time.Second},
		{name: "the spec's", spec: ptr.To[int64](45), want: 45 * time.Second},
		{name: "the spec's zero", spec: ptr.To[int64](0), want: 0},
		{name: "deleted: the deletion's over the spec's", deleted: true, deletion: ptr.To[int64](5), spec: ptr.To[int64](45), want: 5 * time.Second},
		{name: "deleted at once", deleted: true, deletion: ptr.To[int64](0), spec: ptr.To[int64](45), want: 0},
		{name: "deleted with no deletion grace: the spec's", deleted: true, spec: ptr.To[int64](45), want: 45 * time.Second},
		{name: "deleted with neither: the default", deleted: true, want: 30 * time.Second},
		{name: "a deletion grace without a deletion is not one", deletion: ptr.To[int64](5), spec: ptr.To[int64](45), want: 45 * time.Second},
		{name: "an eviction shortens", spec: ptr.To[int64](45), override: ptr.To(time.Duration(0)), want: 0},
		{name: "an override never lengthens", deleted: true, deletion: ptr.To[int64](5), override: ptr.To(time.Minute), want: 5 * time.Second},
		{name: "never negative", spec: ptr.To[int64](-3), want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionGracePeriodSeconds: tc.deletion},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: tc.spec}}
			if tc.deleted {
				pod.DeletionTimestamp = &now
			}
			if got := GracePeriod(pod, tc.override); got != tc.want {
				t.Errorf("GracePeriod = %v, want %v", got, tc.want)
			}
		})
	}
}
