package app

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	nft "github.com/svcnet/svcnet/internal/nftables"
)

// TestEBPFMasqueradeCleanup: in a namespace of the test's own, the ebpf
// mode's fixed masquerade rule is written for both families (again at a
// restart, the same), and --cleanup's removal leaves no table of it.
func TestEBPFMasqueradeCleanup(t *testing.T) {
	ns := netnstest.New(t, "ebpf-masq")
	// Inside netns.Do, on a goroutine of its own: errors, not Fatal.
	tables := func() (n int) {
		for _, f := range []nft.Family{nft.IPv4, nft.IPv6} {
			r, err := nft.OpenReader(f, ebpfTable)
			if err != nil {
				t.Error(err)
				return -1
			}
			ok, err := r.Exists()
			r.Close()
			if err != nil {
				t.Error(err)
				return -1
			}
			if ok {
				n++
			}
		}
		return n
	}
	err := netns.Do(ns, func() error {
		for range 2 {
			for _, f := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
				if err := ebpfMasquerade(f, 0x4000); err != nil {
					return err
				}
			}
		}
		if n := tables(); n != 2 {
			t.Errorf("%d masquerade tables, want one per family", n)
		}
		if err := cleanupEBPF(); err != nil {
			return err
		}
		if n := tables(); n != 0 {
			t.Errorf("%d masquerade tables after the cleanup", n)
		}
		return cleanupEBPF() // nothing left: no error
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEBPFLBAlgorithm: random and maglev are taken, anything else is
// refused before the proxy starts.
func TestEBPFLBAlgorithm(t *testing.T) {
	for _, c := range []struct {
		algorithm string
		ok        bool
	}{{"random", true}, {"maglev", true}, {"rr", false}, {"Maglev", false}} {
		o := Defaults()
		o.Mode, o.EBPFCgroup, o.EBPFLBAlgorithm = "ebpf", "/sys/fs/cgroup/svcnet-x", c.algorithm
		if err := o.Validate(); (err == nil) != c.ok {
			t.Errorf("--ebpf-lb-algorithm %s: %v", c.algorithm, err)
		}
	}
}
