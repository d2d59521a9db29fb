package allocator

import (
	"net/netip"
	"sync"
	"testing"
)

func TestIPRangeSizes(t *testing.T) {
	cases := []struct {
		cidr  string
		size  int
		first string
		last  string
	}{
		{"10.96.0.0/12", 1<<20 - 2, "10.96.0.1", "10.111.255.254"},
		{"10.0.0.0/29", 6, "10.0.0.1", "10.0.0.6"},
		{"10.0.0.5/24", 254, "10.0.0.1", "10.0.0.254"},
		{"fd00::/120", 255, "fd00::1", "fd00::ff"},
	}
	for _, c := range cases {
		r, err := NewIPRange(c.cidr)
		if err != nil {
			t.Fatalf("%s: %v", c.cidr, err)
		}
		if r.Size() != c.size || r.Nth(0).String() != c.first || r.Nth(c.size-1).String() != c.last {
			t.Errorf("%s: size %d first %s last %s; want %d %s %s", c.cidr, r.Size(), r.Nth(0), r.Nth(r.Size()-1), c.size, c.first, c.last)
		}
	}
	for _, bad := range []string{"10.0.0.0/31", "10.0.0.0/33", "banana", "10.0.0.1"} {
		if _, err := NewIPRange(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestIPRangeAllocation(t *testing.T) {
	r, _ := NewIPRange("10.0.0.0/28") // 14 addresses
	want := netip.MustParseAddr("10.0.0.10")
	if err := r.AllocateIP(want); err != nil {
		t.Fatal(err)
	}
	if err := r.AllocateIP(want); err == nil {
		t.Error("same IP twice")
	}
	for _, out := range []string{"10.0.0.0", "10.0.0.15", "10.0.1.1"} {
		if err := r.AllocateIP(netip.MustParseAddr(out)); err == nil {
			t.Errorf("%s allocated", out)
		}
	}
	seen := map[netip.Addr]bool{want: true}
	for range 13 {
		ip, err := r.AllocateNextIP()
		if err != nil {
			t.Fatal(err)
		}
		if seen[ip] || !r.Contains(ip) {
			t.Fatalf("bad or repeated %s", ip)
		}
		seen[ip] = true
	}
	if _, err := r.AllocateNextIP(); err == nil {
		t.Fatal("allocated past the end")
	}
	r.ReleaseIP(want)
	if ip, err := r.AllocateNextIP(); err != nil || ip != want {
		t.Fatalf("after release: %s %v", ip, err)
	}
}

// Dynamic allocation prefers the upper band, leaving the lower band to
// requested addresses like the DNS service's .10.
func TestDynamicAllocationAvoidsStaticBand(t *testing.T) {
	r, _ := NewIPRange("10.96.0.0/24") // 254 addresses, static band 16
	for range 200 {
		ip, err := r.AllocateNextIP()
		if err != nil {
			t.Fatal(err)
		}
		if ip.As4()[3] <= 16 {
			t.Fatalf("dynamic allocation %s in the static band", ip)
		}
	}
}

func TestConcurrentAllocation(t *testing.T) {
	r, _ := NewPortRange("30000-30999")
	var mu sync.Mutex
	seen := map[int]bool{}
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				p, err := r.AllocateNextPort()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[p] {
					t.Errorf("port %d twice", p)
				}
				seen[p] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if r.Free() != 0 {
		t.Errorf("%d free, want 0", r.Free())
	}
}

func TestParsePortRange(t *testing.T) {
	cases := []struct {
		in         string
		base, size int
		ok         bool
	}{
		{"30000-32767", 30000, 2768, true},
		{"8477", 8477, 1, true},
		{" 8000-9000 ", 8000, 1001, true},
		{"9000-8000", 0, 0, false},
		{"0-10", 0, 0, false},
		{"1-70000", 0, 0, false},
		{"a-b", 0, 0, false},
	}
	for _, c := range cases {
		base, size, err := ParsePortRange(c.in)
		if (err == nil) != c.ok || base != c.base || size != c.size {
			t.Errorf("%q: %d %d %v", c.in, base, size, err)
		}
	}
}

func TestStaticBand(t *testing.T) {
	for _, c := range []struct{ size, band int }{{6, 0}, {14, 0}, {254, 16}, {2768, 173}, {1 << 20, 256}} {
		if got := StaticBand(c.size); got != c.band {
			t.Errorf("StaticBand(%d) = %d, want %d", c.size, got, c.band)
		}
	}
}
