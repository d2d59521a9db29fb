package proxy_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	utiliptables "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/iptables"
	"github.com/svcnet/svcnet/internal/proxy/nftables"
	"github.com/svcnet/svcnet/internal/proxy/proxytest"
	"github.com/svcnet/svcnet/internal/proxy/userspace"
	"github.com/svcnet/svcnet/internal/svcstate"
	. "github.com/svcnet/svcnet/internal/svcstate/svctest"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// syncNFTablesOnce programs the nftables mode of family, with node's
// configuration, into the calling thread's network namespace: one sync
// of a proxier that then closes.
func syncNFTablesOnce(family v1.IPFamily, tracker *svcstate.Tracker, node proxy.NodeConfig) error {
	k, err := nftables.OpenKernel(family)
	if err != nil {
		return err
	}
	defer k.Close()
	p, err := nftables.NewProxier(nftables.ProxierConfig{Sync: proxy.SyncerConfig{Tracker: tracker, Logger: quiet}, Rules: nftables.Config{NodeConfig: node}, Kernel: k})
	if err != nil {
		return err
	}
	return p.Sync(context.Background())
}

// ourTables returns iptables-save output of the filter and nat tables in
// a comparable form: our chains only (KUBE-), counters dropped, chains
// sorted, and the rules of the top-level chains sorted, since editing
// syncs may order them differently without changing any packet's fate.
// It checks that the node-port jump ends nat KUBE-SERVICES.
func ourTables(t *testing.T, ex *utiliptables.Exec) string {
	t.Helper()
	var out []string
	for _, table := range []string{"filter", "nat"} {
		data, err := ex.Save(context.Background(), table)
		if err != nil {
			t.Fatal(err)
		}
		chains := map[string][]string{}
		for _, l := range strings.Split(string(data), "\n") {
			switch {
			case strings.HasPrefix(l, ":KUBE-"):
				name, _, _ := strings.Cut(l[1:], " ")
				if chains[name] == nil {
					chains[name] = []string{}
				}
			case strings.HasPrefix(l, "-A KUBE-"):
				name, _, _ := strings.Cut(l[3:], " ")
				chains[name] = append(chains[name], l)
			}
		}
		if table == "nat" {
			svc := chains["KUBE-SERVICES"]
			if len(svc) == 0 || !strings.Contains(svc[len(svc)-1], "kubernetes service nodeports") {
				t.Errorf("nat KUBE-SERVICES does not end with the node-port jump: %q", svc)
			}
		}
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for n := range chains {
				if !yield(n) {
					return
				}
			}
		}) {
			rules := chains[name]
			switch name {
			case "KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-EXTERNAL-SERVICES", "KUBE-PROXY-FIREWALL":
				rules = slices.Sorted(slices.Values(rules))
			}
			out = append(out, table+" :"+name)
			out = append(out, rules...)
		}
	}
	return strings.Join(out, "\n")
}

// TestEditingSyncsOnTheKernel runs partial syncs that edit the top-level
// chains with -D and -I inside `iptables-restore --noflush`, split into
// several restores, on both iptables backends, and checks after every
// change that the kernel holds exactly what a full sync into a fresh
// namespace produces.
func TestEditingSyncsOnTheKernel(t *testing.T) {
	framework.RequireRoot(t)
	for _, variant := range []string{"iptables", "iptables-legacy", "iptables-early"} {
		t.Run(variant, func(t *testing.T) {
			binary, early := strings.CutSuffix(variant, "-early")
			ns := framework.NewNetns(t, "edit")
			ex := &utiliptables.Exec{Binary: binary, Netns: ns.Name}
			var apply utiliptables.Executor = ex
			if early {
				// EarlyCommit watches the kernel's notifications in the
				// namespace the commands run in: run them all there.
				apply = inNetns{ns: ns, ex: &utiliptables.Exec{Binary: binary, EarlyCommit: true}}
			}
			tracker := svcstate.NewTracker(svcstate.Config{NodeName: "node-0", Logger: quiet})
			cfg := iptables.Config{NodeConfig: proxy.NodeConfig{Node: proxy.Node{Name: "node-0"}, ClusterCIDR: netipPrefix("10.244.0.0/16")}}
			p, err := iptables.NewProxier(iptables.ProxierConfig{
				Sync:                proxy.SyncerConfig{Tracker: tracker, Logger: quiet},
				Rules:               cfg,
				Executor:            apply,
				EditTopLevelChains:  true,
				MaxChainsPerRestore: 12,
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			check := func(step string) {
				t.Helper()
				if err := p.Sync(ctx); err != nil {
					t.Fatalf("%s: sync: %v", step, err)
				}
				// The reference: one full sync of the same snapshot into a
				// fresh namespace.
				ref := framework.NewNetns(t, "ref")
				refEx := &utiliptables.Exec{Binary: binary, Netns: ref.Name}
				rp, err := iptables.NewProxier(iptables.ProxierConfig{Sync: proxy.SyncerConfig{Tracker: tracker, Logger: quiet}, Rules: cfg, Executor: refEx})
				if err != nil {
					t.Fatal(err)
				}
				if err := rp.Sync(ctx); err != nil {
					t.Fatalf("%s: reference sync: %v", step, err)
				}
				if got, want := ourTables(t, ex), ourTables(t, refEx); got != want {
					t.Errorf("%s: kernel differs from a full sync:\n%s", step, diffLines(want, got))
				}
			}
			for i := range 20 {
				tracker.OnServiceAdd(proxytest.WebService(i))
				tracker.OnEndpointSliceAdd(proxytest.WebSlice(i, 3, true))
			}
			check("first sync")
			tracker.OnEndpointSliceUpdate(nil, proxytest.WebSlice(7, 3, false))
			check("one endpoint unready")
			tracker.OnServiceDelete(proxytest.WebService(3))
			check("service deleted")
			tracker.OnEndpointSliceDelete(proxytest.WebSlice(4, 3, true))
			check("service without endpoints")
			tracker.OnServiceAdd(proxytest.WebService(40))
			tracker.OnEndpointSliceAdd(proxytest.WebSlice(40, 2, true))
			tracker.OnServiceUpdate(nil, proxytest.WebService(5, ExternalIPs("203.0.113.5"), ResourceVersion("2")))
			check("service added, external IP added")
			for i := 10; i < 20; i++ {
				tracker.OnServiceDelete(proxytest.WebService(i))
			}
			check("ten services deleted at once")

			// Someone flushes KUBE-SERVICES: the next editing sync cannot
			// find the rule it deletes, fails as a whole, and the retry is
			// a full sync that repairs everything.
			ns.Run(binary, "-t", "nat", "-F", "KUBE-SERVICES")
			tracker.OnServiceDelete(proxytest.WebService(1))
			if err := p.Sync(ctx); err == nil {
				t.Error("an edit of a flushed chain succeeded")
			}
			check("repaired after a flush")
		})
	}
}

func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// TestCleanupOnTheKernel programs every mode's rules into a namespace and
// checks that `svcnet proxy --cleanup` leaves nothing of any.
func TestCleanupOnTheKernel(t *testing.T) {
	framework.RequireRoot(t)
	ns := framework.NewNetns(t, "cleanup")
	ex := &utiliptables.Exec{Netns: ns.Name, Binary: "iptables"}
	tracker := svcstate.NewTracker(svcstate.Config{NodeName: "node-0", Logger: quiet})
	for i := range 5 {
		tracker.OnServiceAdd(proxytest.WebService(i, LoadBalancer(fmt.Sprintf("198.51.100.%d", i)), SourceRanges("203.0.113.0/24")))
		tracker.OnEndpointSliceAdd(proxytest.WebSlice(i, 3, true))
	}
	p, err := iptables.NewProxier(iptables.ProxierConfig{Sync: proxy.SyncerConfig{Tracker: tracker, Logger: quiet}, Executor: ex})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	// And the userspace mode's jumps and chains, by hand.
	for _, j := range userspace.JumpRules() {
		ns.Run("iptables", "-t", "nat", "-N", j.Target)
		ns.Run("iptables", append([]string{"-t", "nat", "-I", j.Chain}, j.Args()...)...)
	}
	// And the nftables mode's tables, both families.
	for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		if err := ns.Do(func() error {
			return syncNFTablesOnce(fam, tracker, proxy.NodeConfig{Family: fam})
		}); err != nil {
			t.Fatal(err)
		}
	}
	before := ns.Run("iptables-save")
	if !strings.Contains(before, "KUBE-PORTALS-CONTAINER") || !strings.Contains(before, "KUBE-FW-") {
		t.Fatalf("rules missing before the cleanup:\n%s", before)
	}
	if tables := ns.Run("nft", "list", "tables"); !strings.Contains(tables, "table ip kube-proxy") || !strings.Contains(tables, "table ip6 kube-proxy") {
		t.Fatalf("nftables tables missing before the cleanup:\n%s", tables)
	}
	ns.Run(framework.Binary(t), "proxy", "--cleanup")
	if after := ns.Run("iptables-save"); strings.Contains(after, "KUBE-") {
		t.Errorf("left after --cleanup:\n%s", after)
	}
	if tables := ns.Run("nft", "list", "tables"); strings.Contains(tables, "kube-proxy") {
		t.Errorf("nftables tables left after --cleanup:\n%s", tables)
	}
}

// inNetns runs every command of an Exec from a thread inside ns. All six
// methods are wrapped: an Exec left to run one on its own would program
// the test's own namespace, the host's.
type inNetns struct {
	ns *framework.Netns
	ex *utiliptables.Exec
}

func (n inNetns) Restore(ctx context.Context, data []byte) error {
	return n.ns.Do(func() error { return n.ex.Restore(ctx, data) })
}

func (n inNetns) Save(ctx context.Context, table string) (out []byte, err error) {
	err = n.ns.Do(func() error { out, err = n.ex.Save(ctx, table); return err })
	return out, err
}

func (n inNetns) EnsureChain(ctx context.Context, table, chain string) error {
	return n.ns.Do(func() error { return n.ex.EnsureChain(ctx, table, chain) })
}

func (n inNetns) EnsureRule(ctx context.Context, table, chain string, args ...string) error {
	return n.ns.Do(func() error { return n.ex.EnsureRule(ctx, table, chain, args...) })
}

func (n inNetns) DeleteRule(ctx context.Context, table, chain string, args ...string) error {
	return n.ns.Do(func() error { return n.ex.DeleteRule(ctx, table, chain, args...) })
}

func (n inNetns) ChainExists(ctx context.Context, table, chain string) (ok bool, err error) {
	err = n.ns.Do(func() error { ok, err = n.ex.ChainExists(ctx, table, chain); return err })
	return ok, err
}

var _ utiliptables.Executor = inNetns{}
