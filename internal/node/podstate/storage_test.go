package podstate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestStorageEviction(t *testing.T) {
	limited := func(name, limit string) corev1.Container {
		c := spec(name)
		if limit != "" {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(limit)}
		}
		return c
	}
	const mi = 1 << 20
	cases := []struct {
		name       string
		containers []corev1.Container
		usage      map[string]int64
		want       string // the message, "" for no eviction
	}{
		{"no limit", []corev1.Container{limited("a", "")}, map[string]int64{"a": 1 << 30}, ""},
		{"within", []corev1.Container{limited("a", "5Mi")}, map[string]int64{"a": 5 * mi}, ""},
		{"over: the pod's sum first", []corev1.Container{limited("a", "5Mi")}, map[string]int64{"a": 10 * mi},
			"Pod ephemeral local storage usage exceeds the total limit of containers 5Mi. "},
		{"the sum counts unlimited containers' usage", []corev1.Container{limited("a", "5Mi"), limited("b", "")}, map[string]int64{"a": 3 * mi, "b": 3 * mi},
			"Pod ephemeral local storage usage exceeds the total limit of containers 5Mi. "},
		{"one container over its own within the sum", []corev1.Container{limited("a", "1Mi"), limited("b", "9Mi")}, map[string]int64{"a": 2 * mi, "b": mi},
			`Container a exceeded its local ephemeral storage limit "1Mi". `},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := podOf(corev1.RestartPolicyAlways, nil, tc.containers...)
			if !HasStorageLimit(pod) && tc.want != "" {
				t.Fatal("HasStorageLimit false for a limited pod")
			}
			r := StorageEviction(pod, tc.usage)
			got := ""
			if r != nil {
				got = r.Message
				if r.Reason != "Evicted" {
					t.Errorf("reason %q", r.Reason)
				}
			}
			if got != tc.want {
				t.Errorf("eviction %q, want %q", got, tc.want)
			}
		})
	}
}
