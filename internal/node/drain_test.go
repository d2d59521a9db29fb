package node

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestHoldsForDrain(t *testing.T) {
	plain := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	hooked := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}}}}}
	asKubelet := plain.DeepCopy()
	asKubelet.Annotations = map[string]string{EndpointDrainAnnotation: "none"}
	cases := []struct {
		name     string
		pod      *corev1.Pod
		services int
		grace    time.Duration
		want     bool
	}{
		{"backs a service", plain, 1, 30 * time.Second, true},
		{"backs no service", plain, 0, 30 * time.Second, false},
		{"has its own preStop drain", hooked, 2, 30 * time.Second, false},
		{"asks to stop as kubelet stops it", asKubelet, 1, 30 * time.Second, false},
		{"forced deletion", plain, 1, 0, false},
	}
	for _, tc := range cases {
		if got := holdsForDrain(tc.pod, tc.services, tc.grace); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := drainLimit(30 * time.Second); got != 15*time.Second {
		t.Errorf("drain limit of a 30 s grace period: %s, want half of it", got)
	}
}

func TestStillRouted(t *testing.T) {
	ep := func(addr string, ready *bool) discovery.Endpoint {
		return discovery.Endpoint{Addresses: []string{addr}, Conditions: discovery.EndpointConditions{Ready: ready}}
	}
	slice := func(eps ...discovery.Endpoint) discovery.EndpointSlice {
		return discovery.EndpointSlice{Endpoints: eps}
	}
	cases := []struct {
		name   string
		slices []discovery.EndpointSlice
		want   bool
	}{
		{"ready", []discovery.EndpointSlice{slice(ep("10.0.0.9", ptr.To(true)))}, true},
		{"ready unset means ready", []discovery.EndpointSlice{slice(ep("10.0.0.9", nil))}, true},
		{"terminating (not ready)", []discovery.EndpointSlice{slice(ep("10.0.0.9", ptr.To(false)))}, false},
		{"gone from the slice", []discovery.EndpointSlice{slice(ep("10.0.0.8", ptr.To(true)))}, false},
		{"listed second (proxies route the first address only)", []discovery.EndpointSlice{slice(discovery.Endpoint{Addresses: []string{"10.0.0.8", "10.0.0.9"}})}, false},
		{"ready in a second Service's slice", []discovery.EndpointSlice{
			slice(ep("10.0.0.9", ptr.To(false))), slice(ep("10.0.0.8", nil), ep("10.0.0.9", nil))}, true},
		{"no slices", nil, false},
	}
	for _, tc := range cases {
		if got := stillRouted(tc.slices, []string{"10.0.0.9"}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAwaitUnrouted: the drain waits for the endpoint controller, and no
// longer than its context when the slice never changes; it returns the
// newest version of the slices the proxies program.
func TestAwaitUnrouted(t *testing.T) {
	ready := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "ns", ResourceVersion: "10",
			Labels: map[string]string{discovery.LabelServiceName: "web"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints:   []discovery.Endpoint{{Addresses: []string{"10.0.0.9"}, Conditions: discovery.EndpointConditions{Ready: ptr.To(true)}}},
	}
	// A headless Service's slice, newer, that no proxy programs.
	headless := ready.DeepCopy()
	headless.Name, headless.ResourceVersion = "web-headless", "99"
	headless.Labels = map[string]string{discovery.LabelServiceName: "web", "service.kubernetes.io/headless": ""}
	headless.Endpoints[0].Conditions.Ready = ptr.To(false)
	t.Run("returns once the endpoint is not ready", func(t *testing.T) {
		client := fake.NewClientset(ready.DeepCopy(), headless.DeepCopy())
		a := &Agent{client: client}
		var updated atomic.Bool
		go func() {
			time.Sleep(3 * drainPoll)
			s := ready.DeepCopy()
			s.Endpoints[0].Conditions.Ready = ptr.To(false)
			s.ResourceVersion = "12"
			updated.Store(true)
			if _, err := client.DiscoveryV1().EndpointSlices("ns").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
				t.Error(err)
			}
		}()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		version, ok := a.awaitUnrouted(ctx, "ns", []string{"other", "web"}, "10.0.0.9")
		if !updated.Load() {
			t.Fatalf("returned after %s while the slice still routed to the pod", time.Since(start))
		}
		if !ok || version != 12 {
			t.Fatalf("returned %d, %v after %s; want version 12 (the headless slice's does not count)", version, ok, time.Since(start))
		}
	})
	t.Run("another Service's slice does not count", func(t *testing.T) {
		a := &Agent{client: fake.NewClientset(ready.DeepCopy())}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, ok := a.awaitUnrouted(ctx, "ns", []string{"other"}, "10.0.0.9"); !ok {
			t.Fatal("waited on a slice of a Service that does not select the pod")
		}
	})
	t.Run("gives up when its context ends", func(t *testing.T) {
		a := &Agent{client: fake.NewClientset(ready.DeepCopy())}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 3*drainPoll)
		defer cancel()
		_, ok := a.awaitUnrouted(ctx, "ns", []string{"web"}, "10.0.0.9")
		if d := time.Since(start); ok || d < 3*drainPoll {
			t.Fatalf("returned %v after %s, before the end, while the slice routed to the pod", ok, d)
		}
	})
}
