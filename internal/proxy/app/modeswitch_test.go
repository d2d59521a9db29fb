package app

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	utiliptables "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/iptables/iptablestest"
	kipvs "github.com/svcnet/svcnet/internal/ipvs"
	"github.com/svcnet/svcnet/internal/proxy/conntrack"
	"github.com/svcnet/svcnet/internal/proxy/iptables"
	ipvsproxy "github.com/svcnet/svcnet/internal/proxy/ipvs"
	"github.com/svcnet/svcnet/internal/proxy/trace"
	"github.com/svcnet/svcnet/internal/proxy/userspace"
	"github.com/svcnet/svcnet/internal/svcstate"
	. "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

var (
	webIP  = netip.MustParseAddr("10.96.0.20")
	webPod = netip.MustParseAddrPort("10.244.1.2:8080")
)

// dnatToWeb says whether a pod's packet to the web Service reaches its
// endpoint through the kernel's rules as they are.
func dnatToWeb(t *testing.T, kernel utiliptables.Executor) bool {
	t.Helper()
	var all []byte
	for _, table := range []string{"filter", "nat"} {
		b, err := kernel.Save(context.Background(), table)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	rs, err := trace.Parse(all)
	if err != nil {
		t.Fatal(err)
	}
	pkt := trace.Packet{Src: netip.MustParseAddr("10.244.1.5"), Dst: netip.AddrPortFrom(webIP, 80), Proto: "tcp"}
	out := trace.Trace(rs, pkt, trace.Env{}).Outcomes()
	return len(out) == 1 && out[0].DNAT && out[0].Dst == webPod
}

func webTracker() *svcstate.Tracker {
	tr := svcstate.NewTracker(svcstate.Config{NodeName: "node-1", Logger: quiet})
	tr.OnServiceAdd(Service("default", "web", webIP.String(), Port("http", v1.ProtocolTCP, 80, 0)))
	tr.OnEndpointSliceAdd(Slice("default", "web", "web-1", SlicePort("http", v1.ProtocolTCP, 8080), Endpoint(webPod.Addr().String(), "node-1")))
	return tr
}

// ipvsLeftovers writes what the ipvs mode keeps in iptables: its chains,
// jumps, and rules between them.
func ipvsLeftovers(t *testing.T, kernel *iptablestest.Fake) {
	ctx := context.Background()
	for _, c := range ipvsproxy.NATChains {
		_ = kernel.EnsureChain(ctx, "nat", c)
	}
	for _, c := range ipvsproxy.FilterChains {
		_ = kernel.EnsureChain(ctx, "filter", c)
	}
	for _, j := range ipvsproxy.Owned().Jumps {
		if err := kernel.EnsureRule(ctx, j.Table, j.Chain, j.Args()...); err != nil {
			t.Fatal(err)
		}
	}
	if err := kernel.Restore(ctx, []byte("*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-LOAD-BALANCER - [0:0]\n"+
		"-A KUBE-SERVICES -j KUBE-LOAD-BALANCER\n-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ\nCOMMIT\n"+
		"*filter\n:KUBE-IPVS-FILTER - [0:0]\n-A KUBE-IPVS-FILTER -j RETURN\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
}

// TestModeSwitchKeepsSharedRules: the iptables and ipvs modes share chain
// names and jumps. Each removes the other's leftovers once it has synced,
// keeping what it uses: traffic is carried throughout.
func TestModeSwitchKeepsSharedRules(t *testing.T) {
	ctx := context.Background()
	all := func(kernel *iptablestest.Fake) string {
		var b strings.Builder
		for _, table := range []string{"mangle", "filter", "nat"} {
			data, _ := kernel.Save(ctx, table)
			b.Write(data)
		}
		return b.String()
	}

	t.Run("ipvs to iptables", func(t *testing.T) {
		kernel := iptablestest.NewFake()
		ipvsLeftovers(t, kernel)
		p, err := iptables.NewProxier(iptables.ProxierConfig{Tracker: webTracker(), Executor: kernel, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if !dnatToWeb(t, kernel) {
			t.Fatalf("the iptables mode's first sync does not carry traffic:\n%s", all(kernel))
		}
		if err := ipvsproxy.Cleanup(ctx, kernel, iptables.Owned()); err != nil {
			t.Fatal(err)
		}
		s := all(kernel)
		if !dnatToWeb(t, kernel) {
			t.Errorf("removing the ipvs leftovers broke the iptables mode's rules:\n%s", s)
		}
		for _, gone := range []string{"KUBE-LOAD-BALANCER", "KUBE-IPVS-FILTER", "kube-proxy firewall rules", "kubernetes ipvs access filter"} {
			if strings.Contains(s, gone) {
				t.Errorf("%s left behind:\n%s", gone, s)
			}
		}
	})

	t.Run("iptables to ipvs", func(t *testing.T) {
		kernel := iptablestest.NewFake()
		p, err := iptables.NewProxier(iptables.ProxierConfig{Tracker: webTracker(), Executor: kernel, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		ipvsLeftovers(t, kernel) // the ipvs mode's first sync, as far as iptables goes
		if err := utiliptables.Remove(ctx, kernel, iptables.Owned(), ipvsproxy.Owned()); err != nil {
			t.Fatal(err)
		}
		s := all(kernel)
		for _, gone := range []string{"KUBE-SVC-", "KUBE-SEP-", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-PROXY-CANARY"} {
			if strings.Contains(s, gone) {
				t.Errorf("%s left behind:\n%s", gone, s)
			}
		}
		for _, kept := range []string{"-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES",
			"-A KUBE-SERVICES -j KUBE-LOAD-BALANCER", "-A FORWARD -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD"} {
			if !strings.Contains(s, kept) {
				t.Errorf("the ipvs mode's %q is gone:\n%s", kept, s)
			}
		}
	})
}

// recorder notes, at each change a proxy makes to the kernel, whether
// the web Service still carries traffic.
type recorder struct {
	*iptablestest.Fake
	t       *testing.T
	mu      sync.Mutex
	carried []string // one entry per change: "ok" or what broke it
}

func (r *recorder) note(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if dnatToWeb(r.t, r.Fake) {
		r.carried = append(r.carried, "ok")
	} else {
		r.carried = append(r.carried, "broken by "+what)
	}
}

func (r *recorder) Restore(ctx context.Context, data []byte) error {
	err := r.Fake.Restore(ctx, data)
	r.note("a restore")
	return err
}

func (r *recorder) DeleteRule(ctx context.Context, table, chain string, args ...string) error {
	err := r.Fake.DeleteRule(ctx, table, chain, args...)
	r.note(fmt.Sprintf("deleting %s %s %v", table, chain, args))
	return err
}

// TestRestartCarriesTraffic: a proxy that starts where others ran (its
// own mode's rules, an ipvs proxy's and a userspace proxy's before it, on
// a kernel with IPVS) keeps the rules it finds until its first sync has
// written its own, then removes the ipvs mode's (the userspace mode's,
// dead without their process, go at once): the Service carries traffic at
// every step.
func TestRestartCarriesTraffic(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	kernel := &recorder{Fake: iptablestest.NewFake(), t: t}
	ipvsLeftovers(t, kernel.Fake)
	us, err := userspace.NewProxier(userspace.Config{Tracker: svcstate.NewTracker(svcstate.Config{Logger: quiet}), Executor: kernel.Fake, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer us.Close()
	if err := us.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	old, err := iptables.NewProxier(iptables.ProxierConfig{Tracker: webTracker(), Executor: kernel.Fake, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if !dnatToWeb(t, kernel.Fake) {
		t.Fatal("the previous proxy's rules do not carry traffic")
	}

	nodeIP := netip.MustParseAddr("192.168.77.1")
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: nodeIP.String()}}}},
		Service("default", "web", webIP.String(), Port("http", v1.ProtocolTCP, 80, 0)),
		Slice("default", "web", "web-1", SlicePort("http", v1.ProtocolTCP, 8080), Endpoint(webPod.Addr().String(), "node-1")))
	o := Defaults()
	o.HostnameOverride = "node-1"
	o.MetricsBindAddress, o.HealthzBindAddress = freeAddr(t), freeAddr(t)
	linkDeleted := make(chan struct{})
	var once sync.Once
	ipvsAccess := &IPVSAccess{
		Open:       func() (*kipvs.Handle, error) { return nil, errors.New("no IPVS in unit tests") },
		DeleteLink: func(string) error { once.Do(func() { close(linkDeleted) }); return nil },
	}
	done := make(chan error, 1)
	go func() {
		done <- RunWith(ctx, o, client, OS{IPTables: kernel, Conntrack: &conntrack.Fake{}, Interfaces: StaticInterfaces{nodeIP},
			HealthCheckListener: &loopbackHC{addrs: map[int]string{}}, IPVS: ipvsAccess})
	}()
	waitFor(t, "the userspace and ipvs modes' rules removed", func() bool {
		nat, _ := kernel.Save(ctx, "nat")
		filter, _ := kernel.Save(ctx, "filter")
		return kernel.restoredOnce() && !strings.Contains(string(nat), "KUBE-PORTALS") &&
			!strings.Contains(string(nat), "KUBE-LOAD-BALANCER") && !strings.Contains(string(filter), "KUBE-IPVS-FILTER")
	})
	<-linkDeleted
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
	kernel.mu.Lock()
	defer kernel.mu.Unlock()
	if i := slices.IndexFunc(kernel.carried, func(s string) bool { return s != "ok" }); i >= 0 {
		t.Errorf("change %d of %d: the Service carried no traffic, %s", i+1, len(kernel.carried), kernel.carried[i])
	}
}

func (r *recorder) restoredOnce() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.carried) > 0
}
