package proxy_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/ipset"
	utiliptables "github.com/svcnet/svcnet/internal/iptables"
	kipvs "github.com/svcnet/svcnet/internal/ipvs"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/app"
	"github.com/svcnet/svcnet/internal/proxy/iptables"
	ipvsproxy "github.com/svcnet/svcnet/internal/proxy/ipvs"
	"github.com/svcnet/svcnet/internal/proxy/nftables"
	"github.com/svcnet/svcnet/internal/svcstate"
	st "github.com/svcnet/svcnet/internal/svcstate/svctest"
	"github.com/svcnet/svcnet/test/e2e/framework"
	"github.com/svcnet/svcnet/test/vm"
)

// BenchmarkProxierSyncVM times the three kernel modes' proxiers against
// the kernel of the test VM, fed directly (no API server: in the
// emulator, etcd times out under the writes of 10,000 Services): N
// ClusterIP Services with 10 endpoints each, the first (full) sync, then
// b.N single-endpoint changes, each timed from the change reaching the
// proxier's tracker to its Sync returning with the kernel programmed.
//
//	go test ./test/e2e/proxy -run '^$' -bench ProxierSyncVM -benchtime 30x -timeout 3h
func BenchmarkProxierSyncVM(b *testing.B) {
	if !vm.InsideB(b, vm.Config{Timeout: 3 * time.Hour, MemoryMiB: 6144, Modules: []string{"ip_vs"}}) {
		return
	}
	for _, n := range []int{1000, 10000} {
		for _, mode := range []string{"ipvs", "iptables", "nftables"} {
			// The framework calls a sub-benchmark twice (b.N = 1, then
			// the -benchtime count): the setup and the full sync are made
			// once, on the parent, and the second call goes on from them.
			var bs *syncBench
			b.Run(fmt.Sprintf("%s/services=%d", mode, n), func(sb *testing.B) {
				if bs == nil {
					bs = newSyncBench(b, mode, n)
				}
				bs.run(sb)
			})
		}
	}
}

var benchNode = proxy.Node{Name: "node-a"}

// syncBench is one mode's proxier over n Services in a namespace.
type syncBench struct {
	mode    string
	n       int
	ns      *framework.Netns
	slice   func(svc int, unreadyFirst bool)
	sync    func(context.Context) error
	full    time.Duration
	unready []bool
}

func newSyncBench(b *testing.B, mode string, n int) *syncBench {
	ns := framework.NewNetns(b, "sync")
	ns.IP("addr", "add", "192.168.80.1/24", "dev", "lo")
	tr := svcstate.NewTracker(svcstate.Config{NodeName: benchNode.Name, Logger: slog.New(slog.DiscardHandler)})
	ep := func(svc, j int) string { return fmt.Sprintf("10.%d.%d.%d", 128+j, svc/250, svc%250+1) }
	slice := func(svc int, unreadyFirst bool) {
		name := fmt.Sprintf("svc-%d", svc)
		opts := []st.SliceOption{st.SlicePort("http", v1.ProtocolTCP, 8080)}
		for j := range 10 {
			var eo []st.EndpointOption
			if j == 0 && unreadyFirst {
				eo = append(eo, st.NotReady())
			}
			opts = append(opts, st.Endpoint(ep(svc, j), "node-b", eo...))
		}
		tr.OnEndpointSliceAdd(st.Slice("default", name, name+"-1", opts...))
	}
	for i := range n {
		tr.OnServiceAdd(st.Service("default", fmt.Sprintf("svc-%d", i), fmt.Sprintf("10.96.%d.%d", i/250, i%250+1),
			st.Port("http", v1.ProtocolTCP, 80, 0)))
		slice(i, false)
	}
	bs := &syncBench{mode: mode, n: n, ns: ns, slice: slice, sync: newModeSyncer(b, mode, ns, tr), unready: make([]bool, n)}
	start := time.Now()
	if err := ns.Do(func() error { return bs.sync(context.Background()) }); err != nil {
		b.Fatal(err)
	}
	bs.full = time.Since(start)
	return bs
}

func (bs *syncBench) run(b *testing.B) {
	ctx := context.Background()
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		k := rand.IntN(bs.n)
		bs.unready[k] = !bs.unready[k]
		start := time.Now()
		bs.slice(k, bs.unready[k])
		if err := bs.ns.Do(func() error { return bs.sync(ctx) }); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(took)
	p := func(q float64) time.Duration { return took[min(len(took)-1, int(q*float64(len(took))))] }
	b.ReportMetric(bs.full.Seconds(), "full-sync-s")
	b.ReportMetric(float64(p(0.5).Microseconds())/1000, "change-p50-ms")
	b.ReportMetric(float64(p(0.99).Microseconds())/1000, "change-p99-ms")
	b.Logf("%s mode, %d Services × 10 endpoints: full sync %s; one change p50 %s p99 %s (%d changes)",
		bs.mode, bs.n, bs.full.Round(time.Millisecond), p(0.5).Round(100*time.Microsecond), p(0.99).Round(100*time.Microsecond), len(took))
}

// newModeSyncer builds mode's proxier over the namespace's kernel state,
// as `svcnet proxy` wires it, and returns its Sync (to be called from
// inside the namespace).
func newModeSyncer(b *testing.B, mode string, ns *framework.Netns, tr *svcstate.Tracker) func(context.Context) error {
	b.Helper()
	quiet := slog.New(slog.DiscardHandler)
	cidr := netip.MustParsePrefix("10.244.0.0/16")
	nodeIPs := []netip.Addr{netip.MustParseAddr("192.168.80.1")}
	// Every sync runs on a thread inside the namespace (as `svcnet proxy`
	// runs inside the node's), so the executors need no `ip netns exec`.
	ex := &utiliptables.Exec{Binary: "iptables"}
	switch mode {
	case "iptables":
		var maxChains int
		if err := ns.Do(func() (err error) { maxChains, err = app.TuneIPTables(context.Background(), ex); return err }); err != nil {
			b.Fatal(err)
		}
		p, err := iptables.NewProxier(iptables.ProxierConfig{
			Sync:                proxy.SyncerConfig{Tracker: tr, Logger: quiet},
			Rules:               iptables.Config{NodeConfig: proxy.NodeConfig{Node: benchNode, NodeIPs: nodeIPs, ClusterCIDR: cidr}},
			Executor:            ex,
			MaxChainsPerRestore: maxChains,
			EditTopLevelChains:  true,
		})
		if err != nil {
			b.Fatal(err)
		}
		return p.Sync
	case "nftables":
		var k *nftables.Kernel
		if err := ns.Do(func() (err error) { k, err = nftables.OpenKernel(v1.IPv4Protocol); return err }); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = k.Close() })
		p, err := nftables.NewProxier(nftables.ProxierConfig{
			Sync:   proxy.SyncerConfig{Tracker: tr, Logger: quiet},
			Rules:  nftables.Config{NodeConfig: proxy.NodeConfig{Family: v1.IPv4Protocol, Node: benchNode, NodeIPs: nodeIPs, ClusterCIDR: cidr}},
			Kernel: k,
		})
		if err != nil {
			b.Fatal(err)
		}
		return p.Sync
	case "ipvs":
		h, err := kipvs.Open("/var/run/netns/" + ns.Name)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(h.Close)
		p, err := ipvsproxy.NewProxier(ipvsproxy.ProxierConfig{
			// The benchmark's changes come faster than the canary's
			// period: as in a running proxy, most syncs are partial.
			Sync:     proxy.SyncerConfig{Tracker: tr, Logger: quiet, FullSyncPeriod: time.Hour},
			Rules:    ipvsproxy.Config{NodeConfig: proxy.NodeConfig{Family: v1.IPv4Protocol, Node: benchNode, NodeIPs: nodeIPs, ClusterCIDR: cidr, NodePortAddresses: nodeIPs}},
			IPVS:     h,
			Links:    ipvsproxy.Netlink{},
			Sets:     &ipset.Runner{},
			IPTables: ex,
		})
		if err != nil {
			b.Fatal(err)
		}
		return p.Sync
	}
	b.Fatalf("unknown mode %s", mode)
	return nil
}
