package ipam

import (
	"net/netip"
	"slices"
	"testing"
)

func addrs(s ...string) map[netip.Addr]bool {
	m := map[netip.Addr]bool{}
	for _, a := range s {
		m[netip.MustParseAddr(a)] = true
	}
	return m
}

func TestNext(t *testing.T) {
	cidr := netip.MustParsePrefix("10.244.1.0/29") // .1 gateway, .2–.6 pods, .7 broadcast
	gw := netip.MustParseAddr("10.244.1.1")
	none := netip.Addr{}
	cases := []struct {
		name string
		last netip.Addr
		used map[netip.Addr]bool
		want string // "" for full
	}{
		{"first ever skips the gateway", none, nil, "10.244.1.2"},
		{"after the last one", netip.MustParseAddr("10.244.1.3"), addrs("10.244.1.2", "10.244.1.3"), "10.244.1.4"},
		{"a freed lower address is not reused", netip.MustParseAddr("10.244.1.4"), addrs("10.244.1.4"), "10.244.1.5"},
		{"skips used ones after the last", netip.MustParseAddr("10.244.1.2"), addrs("10.244.1.3", "10.244.1.4"), "10.244.1.5"},
		{"wraps past the broadcast address", netip.MustParseAddr("10.244.1.6"), addrs("10.244.1.6"), "10.244.1.2"},
		{"wraps to the first free", netip.MustParseAddr("10.244.1.5"), addrs("10.244.1.2", "10.244.1.6"), "10.244.1.3"},
		{"the last one itself when it is the only free", netip.MustParseAddr("10.244.1.4"), addrs("10.244.1.2", "10.244.1.3", "10.244.1.5", "10.244.1.6"), "10.244.1.4"},
		{"full", netip.MustParseAddr("10.244.1.4"), addrs("10.244.1.2", "10.244.1.3", "10.244.1.4", "10.244.1.5", "10.244.1.6"), ""},
		{"a last outside the range starts over", netip.MustParseAddr("10.0.0.9"), nil, "10.244.1.2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Next(cidr, gw, tc.last, tc.used)
			if tc.want == "" {
				if ok {
					t.Fatalf("got %s, want none", got)
				}
				return
			}
			if !ok || got.String() != tc.want {
				t.Fatalf("got %s (%v), want %s", got, ok, tc.want)
			}
		})
	}
}

func TestAllocator(t *testing.T) {
	dir := t.TempDir()
	a := &Allocator{CIDR: netip.MustParsePrefix("10.244.1.0/24"), Gateway: netip.MustParseAddr("10.244.1.1"), Dir: dir}
	must := func(owner string) netip.Addr {
		t.Helper()
		addr, err := a.Allocate(owner)
		if err != nil {
			t.Fatal(err)
		}
		return addr
	}
	p1, p2 := must("pod-1"), must("pod-2")
	if p1.String() != "10.244.1.2" || p2.String() != "10.244.1.3" {
		t.Fatalf("first two: %s %s", p1, p2)
	}
	if again := must("pod-1"); again != p1 {
		t.Errorf("an owner asking again got %s, holds %s", again, p1)
	}
	if freed := a.Release("pod-1"); !slices.Equal(freed, []netip.Addr{p1}) {
		t.Errorf("released %v", freed)
	}
	// The freed address is not handed out next: a restarted agent (a new
	// Allocator on the same directory) continues after the last.
	b := &Allocator{CIDR: a.CIDR, Gateway: a.Gateway, Dir: dir}
	if p3, err := b.Allocate("pod-3"); err != nil || p3.String() != "10.244.1.4" {
		t.Errorf("after a release: %s %v, want 10.244.1.4", p3, err)
	}
	if owners := b.Owners(); len(owners) != 2 {
		t.Errorf("owners %v", owners)
	}
	// Forcing reuse, as the e2e test does.
	if err := b.SetLast(netip.MustParseAddr("10.244.1.1")); err != nil {
		t.Fatal(err)
	}
	if p4, _ := b.Allocate("pod-4"); p4 != p1 {
		t.Errorf("after SetLast: %s, want the freed %s", p4, p1)
	}
}
