package iptables_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/svcnet/svcnet/internal/iptables/iptablestest"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/iptables"
	"github.com/svcnet/svcnet/internal/proxy/proxytest"
	"github.com/svcnet/svcnet/internal/svcstate"
	. "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

func TestBuildIsDeterministic(t *testing.T) {
	tr := quietTracker()
	for _, fx := range fixtures[:3] {
		feed(tr, fx.Objects)
	}
	snap, _ := tr.Snapshot()
	a := iptables.Build(nodeConfig, iptables.Input{Snapshot: snap, Full: true})
	for range 5 {
		if b := iptables.Build(nodeConfig, iptables.Input{Snapshot: snap, Full: true}); string(a.Data) != string(b.Data) {
			t.Fatal("same input, different rules")
		}
	}
}

func TestLargeClusterDropsEndpointComments(t *testing.T) {
	cfg := nodeConfig
	cfg.LargeClusterEndpoints = 5
	tr := quietTracker()
	tr.OnServiceAdd(proxytest.WebService(1))
	tr.OnEndpointSliceAdd(proxytest.WebSlice(1, 3, true))
	snap, ch := tr.Snapshot()
	small := iptables.Build(cfg, iptables.Input{Snapshot: snap, Changed: ch.Ports})
	if !strings.Contains(string(small.Data), `-> 10.244.2.1:8080"`) {
		t.Fatalf("small cluster lacks endpoint comments:\n%s", small.Data)
	}
	// Growing past the threshold rewrites every chain without comments.
	tr.OnServiceAdd(proxytest.WebService(2))
	tr.OnEndpointSliceAdd(proxytest.WebSlice(2, 3, true))
	snap, ch = tr.Snapshot()
	large := iptables.Build(cfg, iptables.Input{Snapshot: snap, Changed: ch.Ports, Previous: small.State})
	if !large.Full || strings.Contains(string(large.Data), "-> 10.244.") || count(string(large.Data), ":KUBE-SVC-") != 2 {
		t.Errorf("large cluster rules:\n%s", large.Data)
	}
	if !strings.Contains(string(large.Data), `--comment "default/web-1:http cluster IP"`) {
		t.Error("service-level comments must stay")
	}
}

func TestDualStackFamiliesAreIndependent(t *testing.T) {
	v6 := iptables.Config{NodeConfig: proxy.NodeConfig{Family: v1.IPv6Protocol, Node: proxy.Node{Name: "node-a"}}}
	tr := quietTracker()
	tr.OnServiceAdd(Service("default", "web", "10.96.0.10", Port("http", tcp, 80, 0), ClusterIPs("10.96.0.10", "fd00::10")))
	tr.OnEndpointSliceAdd(Slice("default", "web", "v4", SlicePort("http", tcp, 8080), Endpoint("10.244.1.2", "node-a")))
	tr.OnEndpointSliceAdd(Slice("default", "web", "v6", AddressType(discovery.AddressTypeIPv6), SlicePort("http", tcp, 8080),
		Endpoint("fd00:10:244::2", "node-a")))
	snap, _ := tr.Snapshot()
	r4 := iptables.Build(nodeConfig, iptables.Input{Snapshot: snap, Full: true})
	r6 := iptables.Build(v6, iptables.Input{Snapshot: snap, Full: true})
	if strings.Contains(string(r4.Data), "fd00") || strings.Contains(string(r6.Data), "10.244.") {
		t.Fatalf("families mixed:\n%s\n%s", r4.Data, r6.Data)
	}
	if !strings.Contains(string(r6.Data), "--to-destination [fd00:10:244::2]:8080") || !strings.Contains(string(r6.Data), "! -d ::1/128") {
		t.Errorf("v6 rules:\n%s", r6.Data)
	}
	// A change to the IPv4 endpoints leaves the IPv6 chains alone.
	tr.OnEndpointSliceAdd(Slice("default", "web", "v4", SlicePort("http", tcp, 8080),
		Endpoint("10.244.1.2", "node-a"), Endpoint("10.244.1.3", "node-a")))
	snap, ch := tr.Snapshot()
	p6 := iptables.Build(v6, iptables.Input{Snapshot: snap, Changed: ch.Ports, Previous: r6.State})
	if p6.Full || p6.Stats.NATChainsWritten != 0 || len(p6.StaleChains) != 0 {
		t.Errorf("v6 partial wrote chains: %+v\n%s", p6.Stats, p6.Data)
	}
	p4 := iptables.Build(nodeConfig, iptables.Input{Snapshot: snap, Changed: ch.Ports, Previous: r4.State})
	if p4.Stats.NATChainsWritten != 2 { // SVC and the new SEP; the other SEP is unchanged
		t.Errorf("v4 partial: %+v", p4.Stats)
	}
}

func TestStats(t *testing.T) {
	want := map[string][2]int{"nodeport-local": {0, 1}, "internal-local": {1, 0}} // no local: internal, external
	for _, fx := range fixtures {
		w, ok := want[fx.Name]
		if !ok {
			continue
		}
		tr := quietTracker()
		feed(tr, fx.Objects)
		snap, _ := tr.Snapshot()
		rs := iptables.Build(nodeConfig, iptables.Input{Snapshot: snap, Full: true})
		s := rs.Stats
		if s.ServicePorts != 2 || s.NoLocalInternal != w[0] || s.NoLocalExternal != w[1] || s.ServicePortsWritten != 2 {
			t.Errorf("%s: stats = %+v", fx.Name, s)
		}
		if lines := strings.Count(string(rs.Data), "\n-A "); s.NATRules+s.FilterRules != lines || s.NATRulesWritten != s.NATRules {
			t.Errorf("%s: rules counted %d+%d, restore has %d", fx.Name, s.NATRules, s.FilterRules, lines)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []proxy.NodeConfig{
		{Family: "IPv5"},
		{MasqueradeBit: 40},
		{ClusterCIDR: netip.MustParsePrefix("fd00::/64")},
		{NodeIPs: []netip.Addr{netip.MustParseAddr("fd00::1")}},
		{NodePortAddresses: []netip.Addr{netip.MustParseAddr("fd00::1")}},
		{Family: v1.IPv6Protocol, NodeIPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}},
	}
	for _, c := range bad {
		if err := (iptables.Config{NodeConfig: c}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "iptables: ") {
			t.Errorf("%+v: %v, want an iptables error", c, err)
		}
	}
	if err := nodeConfig.Validate(); err != nil {
		t.Error(err)
	}
}

// TestInvalidCounter: the conntrack-invalid packets dropped are counted
// in the nfacct counter named, as kube-proxy counts them.
func TestInvalidCounter(t *testing.T) {
	tr := quietTracker()
	feed(tr, fixtures[1].Objects)
	snap, _ := tr.Snapshot()
	for _, tc := range []struct{ counter, want string }{
		{"", "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP"},
		{"ct_state_invalid_dropped_pkts", "-A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP"},
	} {
		cfg := nodeConfig
		cfg.InvalidCounter = tc.counter
		if data := string(iptables.Build(cfg, iptables.Input{Snapshot: snap, Full: true}).Data); !strings.Contains(data, tc.want+"\n") {
			t.Errorf("counter %q: no %q in:\n%s", tc.counter, tc.want, data)
		}
	}
}

func TestOptions(t *testing.T) {
	tr := quietTracker()
	feed(tr, fixtures[1].Objects) // nodeport
	snap, _ := tr.Snapshot()
	cfg := nodeConfig
	cfg.MasqueradeAll, cfg.ConntrackTCPLiberal, cfg.LocalhostNodePorts = true, true, true
	cfg.MasqueradeBit = 1
	cfg.NodePortAddresses = []netip.Addr{nodeIP}
	data := string(iptables.Build(cfg, iptables.Input{Snapshot: snap, Full: true}).Data)
	for _, want := range []string{
		"-j MASQUERADE --random-fully",
		"--or-mark 0x2",
		`-d 10.96.0.10 --dport 80 -j KUBE-MARK-MASQ`, // masquerade-all: no source condition
		`-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -d 192.168.0.10 -j KUBE-NODEPORTS`,
		":KUBE-FIREWALL - [0:0]",
		`block incoming localnet connections`,
	} {
		if !strings.Contains(data, want) {
			t.Errorf("missing %q", want)
		}
	}
	if strings.Contains(data, "INVALID") {
		t.Error("INVALID drop despite tcp_be_liberal")
	}
	fake := iptablestest.NewFake()
	apply(t, fake, cfg, []byte(data))
}

func TestFake(t *testing.T) {
	ctx := context.Background()
	f := iptablestest.NewFake()
	ok := "*nat\n:A - [0:0]\n:B - [0:0]\n-A A -m comment --comment \"x y\" -j B\n-A B -j RETURN\nCOMMIT\n"
	if err := f.Restore(ctx, []byte(ok)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		"*nat\n-X B\nCOMMIT\n",                      // referenced
		"*nat\n:A - [0:0]\n-A A -j NOPE\nCOMMIT\n",  // missing target
		"*nat\n-A MISSING -j ACCEPT\nCOMMIT\n",      // missing chain
		"*nat\n:A - [0:0]\n",                        // no COMMIT
		"*raw\nCOMMIT\n",                            // unknown table
		"*nat\n-D A -j ACCEPT\nCOMMIT\n",            // no such rule
		"*filter\n:X - [0:0]\nCOMMIT\n*nat\n-X A\n", // second table fails: first must not apply either
	} {
		before, _ := f.Save(ctx, "filter")
		beforeNat, _ := f.Save(ctx, "nat")
		if err := f.Restore(ctx, []byte(bad)); err == nil || !strings.Contains(err.Error(), "iptables-restore") {
			t.Errorf("restore %q: err = %v", bad, err)
		}
		after, _ := f.Save(ctx, "filter")
		afterNat, _ := f.Save(ctx, "nat")
		if string(before) != string(after) || string(beforeNat) != string(afterNat) {
			t.Errorf("failed restore %q changed the tables", bad)
		}
	}
	// --noflush: declaring a chain flushes it; -X of an unreferenced,
	// flushed chain works; other chains are untouched.
	if err := f.Restore(ctx, []byte("*nat\n:A - [0:0]\n:B - [0:0]\n-X B\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.Chains("nat"), " "); got != "A INPUT OUTPUT POSTROUTING PREROUTING" {
		t.Errorf("chains = %s", got)
	}
	// Ensure is idempotent and inserts at the top.
	for range 2 {
		if err := f.EnsureRule(ctx, "nat", "PREROUTING", "-m", "comment", "--comment", "two words", "-j", "A"); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.EnsureRule(ctx, "nat", "PREROUTING", "-j", "MISSING"); err == nil {
		t.Error("jump to a missing chain ensured")
	}
	out, _ := f.Save(ctx, "nat")
	if strings.Count(string(out), `-A PREROUTING -m comment --comment "two words" -j A`) != 1 {
		t.Errorf("save:\n%s", out)
	}
	f.FailRestore = func([]byte) error { return errors.New("injected") }
	if err := f.Restore(ctx, []byte(ok)); err == nil {
		t.Error("injected failure ignored")
	}
}

func TestJumpRules(t *testing.T) {
	seen := map[string]bool{}
	for _, j := range iptables.JumpRules(nodeConfig) {
		seen[j.Table+"/"+j.Chain+"->"+j.Target] = true
		if args := j.Args(); args[len(args)-2] != "-j" || args[len(args)-1] != j.Target {
			t.Errorf("args %v", args)
		}
	}
	for _, want := range []string{"nat/PREROUTING->KUBE-SERVICES", "nat/OUTPUT->KUBE-SERVICES", "nat/POSTROUTING->KUBE-POSTROUTING",
		"filter/FORWARD->KUBE-FORWARD", "filter/INPUT->KUBE-PROXY-FIREWALL"} {
		if !seen[want] {
			t.Errorf("missing jump %s", want)
		}
	}
}

// benchWorld is a snapshot of n ClusterIP services with 10 endpoints each,
// the shape of the benchmark.
func benchWorld(n int) (*svcstate.Tracker, *svcstate.Snapshot) {
	tr := quietTracker()
	for i := range n {
		tr.OnServiceAdd(BenchService(i))
		tr.OnEndpointSliceAdd(BenchSlice(i, true))
	}
	snap, _ := tr.Snapshot()
	return tr, snap
}

// BenchmarkBuildFull is the CPU cost of rendering every chain; the
// kernel's cost of loading the result is measured end to end elsewhere.
func BenchmarkBuildFull(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			_, snap := benchWorld(n)
			b.ReportAllocs()
			b.ResetTimer()
			var size int
			for range b.N {
				size = len(iptables.Build(nodeConfig, iptables.Input{Snapshot: snap, Full: true}).Data)
			}
			b.ReportMetric(float64(size), "restore-bytes")
		})
	}
}

// BenchmarkBuildPartial is one endpoint changing readiness: snapshot plus
// rule set, rewriting or editing the top-level chains.
func BenchmarkBuildPartial(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, edit := range []bool{false, true} {
			b.Run(fmt.Sprintf("services=%d/edit=%v", n, edit), func(b *testing.B) {
				tr, snap := benchWorld(n)
				prev := iptables.Build(nodeConfig, iptables.Input{Snapshot: snap, Full: true}).State
				b.ReportAllocs()
				b.ResetTimer()
				var size int
				for i := range b.N {
					tr.OnEndpointSliceUpdate(nil, BenchSlice(i%n, i/n%2 == 1))
					snap, ch := tr.Snapshot()
					rs := iptables.Build(nodeConfig, iptables.Input{Snapshot: snap, Changed: ch.Ports, Previous: prev, EditTopLevel: edit})
					prev, size = rs.State, len(rs.Data)
				}
				b.ReportMetric(float64(size), "restore-bytes")
			})
		}
	}
}
