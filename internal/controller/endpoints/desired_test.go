//lint:file-ignore SA1019 the v1 Endpoints API is deprecated in Kubernetes 1.33 but still served and kept

package endpoints

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func pod(i int, ready bool, mutate ...func(*corev1.Pod)) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%04d", i), Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9376}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func svc() *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default", Labels: map[string]string{"team": "a"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")}}}}
}

func TestDesired(t *testing.T) {
	deleting := func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }
	otherPort := func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 8080 }
	cases := []struct {
		name             string
		pods             []*corev1.Pod
		subsets          int
		ready, notReady  int
		overCapacityMark bool
	}{
		{"ready and not", []*corev1.Pod{pod(1, true), pod(2, false)}, 1, 1, 1, false},
		{"terminating left out", []*corev1.Pod{pod(1, true), pod(2, true, deleting)}, 1, 1, 0, false},
		{"two port sets", []*corev1.Pod{pod(1, true), pod(2, true, otherPort)}, 2, 2, 0, false},
		{"none", nil, 0, 0, 0, false},
	}
	var many []*corev1.Pod
	for i := range 1200 {
		many = append(many, pod(i, i%2 == 0))
	}
	cases = append(cases, struct {
		name             string
		pods             []*corev1.Pod
		subsets          int
		ready, notReady  int
		overCapacityMark bool
	}{"truncated at 1000, ready first", many, 1, 600, 400, true})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ep := Desired(svc(), c.pods)
			ready, notReady := 0, 0
			for _, ss := range ep.Subsets {
				ready += len(ss.Addresses)
				notReady += len(ss.NotReadyAddresses)
			}
			if len(ep.Subsets) != c.subsets || ready != c.ready || notReady != c.notReady {
				t.Errorf("%d subsets %d ready %d not ready; want %d %d %d", len(ep.Subsets), ready, notReady, c.subsets, c.ready, c.notReady)
			}
			if (ep.Annotations[OverCapacityAnnotation] == "truncated") != c.overCapacityMark {
				t.Errorf("annotations %v", ep.Annotations)
			}
			if ep.Labels["team"] != "a" {
				t.Errorf("labels %v", ep.Labels)
			}
		})
	}
}
