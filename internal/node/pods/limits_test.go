package pods

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/node/cgroups"
	"github.com/svcnet/svcnet/internal/node/podstate"
)

// TestLimitsNotEnforced: on a machine without the controllers, a
// container with limits still starts, and its pod is told, once, which
// limits are not enforced; a container without limits gets no cgroup.
func TestLimitsNotEnforced(t *testing.T) {
	cases := []struct {
		name   string
		limits corev1.ResourceList
		event  string
	}{
		{"memory and cpu", corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi"), corev1.ResourceCPU: resource.MustParse("500m")},
			"LimitNotEnforced: Container c: memory and cpu limit not enforced"},
		{"cpu", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, "LimitNotEnforced: Container c: cpu limit not enforced"},
		{"none", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := testNode{events: make(chan string, 4)}
			rt := &Runtime{Node: node, Cgroups: cgroups.Hierarchy{}} // no controllers
			spec := corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Limits: tc.limits}}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1"}, Spec: corev1.PodSpec{Containers: []corev1.Container{spec}}}
			p := New(rt, pod, t.TempDir(), []*podstate.Container{podstate.NewContainer(spec, false)}, func(*ExecInfo) {})
			c := p.Container("c")
			for range 2 { // two starts, one event
				if err := p.makeCgroups(c); err != nil {
					t.Fatal(err)
				}
				if len(c.cgroup.Procs()) != 0 {
					t.Errorf("cgroups %v on a machine without controllers", c.cgroup.Dirs)
				}
			}
			close(node.events)
			var got []string
			for e := range node.events {
				got = append(got, e)
			}
			if tc.event == "" && len(got) > 0 || tc.event != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.event)) {
				t.Errorf("events %q, want one starting %q", got, tc.event)
			}
		})
	}
}
