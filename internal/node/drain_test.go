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

func TestDrainDelay(t *testing.T) {
	plain := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	hooked := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}}}}}
	cases := []struct {
		name     string
		pod      *corev1.Pod
		services int
		delay    time.Duration
		grace    time.Duration
		want     time.Duration
	}{
		{"backs a service", plain, 1, time.Second, 30 * time.Second, time.Second},
		{"backs no service", plain, 0, time.Second, 30 * time.Second, 0},
		{"has its own preStop drain", hooked, 2, time.Second, 30 * time.Second, 0},
		{"turned off", plain, 1, 0, 30 * time.Second, 0},
		{"forced deletion", plain, 1, time.Second, 0, 0},
		{"at most half the grace period", plain, 1, time.Second, time.Second, 500 * time.Millisecond},
	}
	for _, tc := range cases {
		if got := drainDelay(tc.pod, tc.services, tc.delay, tc.grace); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestPlanDrain(t *testing.T) {
	cases := []struct {
		name         string
		delay, grace time.Duration
		want         drainPlan
	}{
		{"default grace", 2 * time.Second, 30 * time.Second, drainPlan{untilGone: 13 * time.Second, delay: 2 * time.Second}},
		{"delay takes half the grace: no wait for the slices", time.Second, 2 * time.Second, drainPlan{delay: time.Second}},
		{"off", 0, 30 * time.Second, drainPlan{}},
	}
	for _, tc := range cases {
		if got := planDrain(tc.delay, tc.grace); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
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
// longer than its limit when the slice never changes.
func TestAwaitUnrouted(t *testing.T) {
	ready := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abc", Namespace: "ns", Labels: map[string]string{discovery.LabelServiceName: "web"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints:   []discovery.Endpoint{{Addresses: []string{"10.0.0.9"}, Conditions: discovery.EndpointConditions{Ready: ptr.To(true)}}},
	}
	t.Run("returns once the endpoint is not ready", func(t *testing.T) {
		client := fake.NewClientset(ready.DeepCopy())
		a := &Agent{client: client}
		var updated atomic.Bool
		go func() {
			time.Sleep(3 * drainPoll)
			s := ready.DeepCopy()
			s.Endpoints[0].Conditions.Ready = ptr.To(false)
			updated.Store(true)
			if _, err := client.DiscoveryV1().EndpointSlices("ns").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
				t.Error(err)
			}
		}()
		start := time.Now()
		a.awaitUnrouted(context.Background(), "ns", []string{"other", "web"}, "10.0.0.9", time.Minute)
		if !updated.Load() {
			t.Fatalf("returned after %s while the slice still routed to the pod", time.Since(start))
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("returned only after %s", time.Since(start))
		}
	})
	t.Run("another Service's slice does not count", func(t *testing.T) {
		a := &Agent{client: fake.NewClientset(ready.DeepCopy())}
		done := make(chan struct{})
		go func() {
			a.awaitUnrouted(context.Background(), "ns", []string{"other"}, "10.0.0.9", time.Minute)
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("waited on a slice of a Service that does not select the pod")
		}
	})
	t.Run("gives up at the limit", func(t *testing.T) {
		a := &Agent{client: fake.NewClientset(ready.DeepCopy())}
		start := time.Now()
		a.awaitUnrouted(context.Background(), "ns", []string{"web"}, "10.0.0.9", 3*drainPoll)
		if d := time.Since(start); d < 3*drainPoll {
			t.Fatalf("returned after %s, before the limit, while the slice routed to the pod", d)
		}
	})
}
