package upstream

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/ingress/route"
	"github.com/svcnet/svcnet/internal/svcstate"
)

type closer struct{ closed atomic.Int32 }

func (c *closer) Close() error { c.closed.Add(1); return nil }

func TestUpstream(t *testing.T) {
	u := New(route.BackendRef{Port: 80})
	if len(u.Endpoints()) != 0 {
		t.Fatal("a new upstream has endpoints")
	}
	u.Set([]string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"})
	var starts []int
	for range 6 {
		starts = append(starts, u.Pick(3))
	}
	if !slices.Equal(starts, []int{0, 1, 2, 0, 1, 2}) {
		t.Errorf("round robin: %v", starts)
	}
	set := u.Load()
	if i, ok := set.ByAffinity(AffinityID("10.0.0.2:80")); !ok || i != 1 {
		t.Errorf("affinity: %d %v", i, ok)
	}
	if _, ok := set.ByAffinity(AffinityID("10.0.0.9:80")); ok {
		t.Error("affinity to a pod not in the set")
	}

	// Tunnels close with their pod, not with other changes.
	a, b := &closer{}, &closer{}
	u.Track(a, "10.0.0.1:80")
	untrack := u.Track(b, "10.0.0.2:80")
	u.Set([]string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.4:80"})
	if a.closed.Load() != 0 || b.closed.Load() != 0 {
		t.Fatal("a tunnel closed by an unrelated change")
	}
	untrack()
	u.Set([]string{"10.0.0.4:80"})
	if a.closed.Load() != 1 || b.closed.Load() != 0 {
		t.Fatalf("closed: a %d (its pod left), b %d (untracked)", a.closed.Load(), b.closed.Load())
	}
}

func TestPool(t *testing.T) {
	p := NewPool()
	x, y := route.BackendRef{Port: 1}, route.BackendRef{Port: 2}
	first := p.For([]route.BackendRef{x, y}, &svcstate.Snapshot{})
	c := &closer{}
	first[1].Track(c, "10.0.0.1:80")
	again := p.For([]route.BackendRef{y}, &svcstate.Snapshot{})
	if again[0] != first[1] {
		t.Fatal("a backend kept across tables got a new upstream")
	}
	if c.closed.Load() != 0 {
		t.Fatal("the tunnel of a backend still routed was closed")
	}
	p.For(nil, &svcstate.Snapshot{})
	if c.closed.Load() != 1 {
		t.Fatal("the tunnel of a backend no route uses stays open")
	}
}

func TestIdle(t *testing.T) {
	now := time.Unix(1000, 0)
	p := NewIdle[int](2)
	if !p.Put("a", 1, now) || !p.Put("a", 2, now.Add(time.Second)) || p.Put("a", 3, now) {
		t.Fatal("Put: two kept per endpoint, the third refused")
	}
	p.Put("b", 4, now)
	if c, used, ok := p.Take("a"); !ok || c != 2 || !used.Equal(now.Add(time.Second)) {
		t.Fatalf("Take: %d %v %v, want the last used", c, used, ok)
	}
	p.Put("a", 5, now.Add(2*time.Second))
	p.Remove("a", 5)
	var dropped []int
	p.Expire(now.Add(time.Second), func(c int) { dropped = append(dropped, c) })
	slices.Sort(dropped)
	if !slices.Equal(dropped, []int{1, 4}) || !p.Empty() {
		t.Fatalf("Expire dropped %v, empty after: %v", dropped, p.Empty())
	}
	if _, _, ok := p.Take("a"); ok {
		t.Fatal("Take from an empty endpoint")
	}
}
