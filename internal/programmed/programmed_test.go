package programmed

import (
	"context"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func lease(name string, version string, renewed time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: map[string]string{ConsumerLabel: "proxy"}},
		Spec:       coordinationv1.LeaseSpec{RenewTime: ptr.To(metav1.NewMicroTime(renewed)), LeaseDurationSeconds: ptr.To(int32(40))},
	}
	if version != "" {
		l.Annotations = map[string]string{VersionAnnotation: version}
	}
	return l
}

// until polls cond for at most 10 s.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestPublisher(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// An earlier run left its Lease: this one takes it over.
	client := fake.NewClientset(lease(LeaseName("proxy", "node-1"), "3", time.Now().Add(-time.Hour)))
	healthy, asked := true, 0
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	isHealthy := func() bool { <-mu; defer func() { mu <- struct{}{} }(); asked++; return healthy }
	setHealthy := func(h bool) { <-mu; healthy = h; mu <- struct{}{} }
	timesAsked := func() int { <-mu; defer func() { mu <- struct{}{} }(); return asked }
	p := NewPublisher(PublisherConfig{Client: client, Kind: "proxy", Holder: "node-1", Renew: 100 * time.Millisecond, Healthy: isHealthy})
	go p.Run(ctx)
	get := func() *coordinationv1.Lease {
		l, err := client.CoordinationV1().Leases(Namespace).Get(ctx, "svcnet-proxy-node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	version := func() uint64 { v, _ := Version(get()); return v }

	p.Set(7)
	until(t, "watermark 7", func() bool { return version() == 7 })
	l := get()
	if l.Labels[ConsumerLabel] != "proxy" || ptr.Deref(l.Spec.HolderIdentity, "") != "node-1" || !Expiry(l).After(time.Now()) {
		t.Errorf("lease %+v: want the proxy label, holder node-1 and a live renewal", l)
	}
	p.Set(5) // lower: ignored
	p.Set(9)
	until(t, "watermark 9", func() bool { return version() == 9 })

	// Healthy, it renews; behind, it stops.
	first := get().Spec.RenewTime.Time
	until(t, "a renewal", func() bool { return get().Spec.RenewTime.After(first) })
	setHealthy(false)
	time.Sleep(150 * time.Millisecond) // a renewal in flight lands
	stale, before := get().Spec.RenewTime.Time, timesAsked()
	time.Sleep(1500 * time.Millisecond)
	if now := get().Spec.RenewTime.Time; !now.Equal(stale) {
		t.Errorf("renewed at %v while unhealthy (was %v)", now, stale)
	}
	// Behind, it looks again once a second, not in a loop.
	if n := timesAsked() - before; n > 3 {
		t.Errorf("asked whether healthy %d times in 1.5 s while unhealthy", n)
	}
	setHealthy(true)
	until(t, "renewals again", func() bool { return get().Spec.RenewTime.After(stale) })
}

func TestWaiter(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := time.Now()
	client := fake.NewClientset(
		lease("svcnet-proxy-a", "10", now),
		lease("svcnet-proxy-b", "5", now),
		lease("svcnet-proxy-silent", "1", now.Add(-time.Minute)), // expired
		lease("svcnet-proxy-new", "", now),                       // no watermark yet
	)
	w := NewWaiter(client)
	w.Start(ctx)

	short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	o := w.Wait(short, 8)
	stop()
	if o.Done() || !slices.Equal(o.Behind, []string{"kube-system/svcnet-proxy-b", "kube-system/svcnet-proxy-new"}) || o.Consumers != 3 {
		t.Errorf("wait for 8: %+v, want b and new behind of 3 live consumers", o)
	}
	short, stop = context.WithTimeout(ctx, 200*time.Millisecond)
	o = w.Wait(short, 1)
	stop()
	if !slices.Equal(o.Behind, []string{"kube-system/svcnet-proxy-new"}) {
		t.Errorf("wait for 1: %+v, want new behind: it has no watermark", o)
	}

	// b catches up and new expires: the wait ends.
	done := make(chan Outcome)
	go func() { done <- w.Wait(ctx, 8) }()
	leases := client.CoordinationV1().Leases(Namespace)
	if _, err := leases.Update(ctx, lease("svcnet-proxy-b", "9", time.Now()), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done:
		t.Fatalf("wait ended with new still live and behind: %+v", o)
	case <-time.After(200 * time.Millisecond):
	}
	soon := lease("svcnet-proxy-new", "", time.Now().Add(-40*time.Second+300*time.Millisecond))
	if _, err := leases.Update(ctx, soon, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done:
		if !o.Done() || o.Consumers != 2 {
			t.Errorf("wait for 8: %+v, want done with a and b live", o)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not end when the last consumer behind expired")
	}
}

// TestPublisherDeleteOnStop: a consumer whose data path ends with it
// takes its Lease away, in its own namespace.
func TestPublisherDeleteOnStop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset()
	p := NewPublisher(PublisherConfig{Client: client, Kind: "ingress", Holder: "ingress-0", Namespace: "ingress-svcnet", DeleteOnStop: true})
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	p.Set(4)
	leases := client.CoordinationV1().Leases("ingress-svcnet")
	until(t, "the Lease", func() bool {
		_, err := leases.Get(context.Background(), "svcnet-ingress-ingress-0", metav1.GetOptions{})
		return err == nil
	})
	cancel()
	<-done
	if _, err := leases.Get(context.Background(), "svcnet-ingress-ingress-0", metav1.GetOptions{}); err == nil {
		t.Error("the Lease is still there after Run ended")
	}
}
