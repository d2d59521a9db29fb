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
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/internal/freeport"
	utiliptables "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/iptables/iptablestest"
	kipvs "github.com/svcnet/svcnet/internal/ipvs"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/conntrack"
	"github.com/svcnet/svcnet/internal/proxy/healthcheck"
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
	ok, err := webReached(kernel)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// webReached is dnatToWeb for goroutines other than the test's.
func webReached(kernel utiliptables.Executor) (bool, error) {
	return dnatTo(kernel, netip.MustParseAddr("10.244.1.5"), netip.AddrPortFrom(webIP, 80), webPod)
}

// dnatTo says whether a TCP packet from src to dst is DNATed to want, and
// only there, by the kernel's rules as they are.
func dnatTo(kernel utiliptables.Executor, src netip.Addr, dst, want netip.AddrPort) (bool, error) {
	var all []byte
	for _, table := range []string{"filter", "nat"} {
		b, err := kernel.Save(context.Background(), table)
		if err != nil {
			return false, err
		}
		all = append(all, b...)
	}
	rs, err := trace.Parse(all)
	if err != nil {
		return false, err
	}
	out := trace.Trace(rs, trace.Packet{Src: src, Dst: dst, Proto: "tcp"}, trace.Env{}).Outcomes()
	return len(out) == 1 && out[0].DNAT && out[0].Dst == want, nil
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
		p, err := iptables.NewProxier(iptables.ProxierConfig{Sync: proxy.SyncerConfig{Tracker: webTracker(), Logger: quiet}, Executor: kernel})
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
		p, err := iptables.NewProxier(iptables.ProxierConfig{Sync: proxy.SyncerConfig{Tracker: webTracker(), Logger: quiet}, Executor: kernel})
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
	mu      sync.Mutex
	carried []string // one entry per change: "ok" or what broke it
}

func (r *recorder) note(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch ok, err := webReached(r.Fake); {
	case err != nil:
		r.carried = append(r.carried, fmt.Sprintf("unreadable after %s: %v", what, err))
	case ok:
		r.carried = append(r.carried, "ok")
	default:
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
	kernel := &recorder{Fake: iptablestest.NewFake()}
	ipvsLeftovers(t, kernel.Fake)
	us, err := userspace.NewProxier(userspace.Config{Sync: proxy.SyncerConfig{Tracker: svcstate.NewTracker(svcstate.Config{Logger: quiet}), Logger: quiet}, Executor: kernel.Fake})
	if err != nil {
		t.Fatal(err)
	}
	defer us.Close()
	if err := us.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	old, err := iptables.NewProxier(iptables.ProxierConfig{Sync: proxy.SyncerConfig{Tracker: webTracker(), Logger: quiet}, Executor: kernel.Fake})
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
	o.MetricsBindAddress, o.HealthzBindAddress = freeport.Addr(t), freeport.Addr(t)
	linkDeleted := make(chan struct{})
	var once sync.Once
	ipvsAccess := &IPVSAccess{
		Open:       func() (*kipvs.Handle, error) { return nil, errors.New("no IPVS in unit tests") },
		DeleteLink: func(string) error { once.Do(func() { close(linkDeleted) }); return nil },
	}
	done := make(chan error, 1)
	go func() {
		done <- RunWith(ctx, o, client, OS{IPTables: kernel, Conntrack: &conntrack.Fake{}, Interfaces: StaticInterfaces{nodeIP},
			HealthCheckListener: &healthcheck.Loopback{}, IPVS: ipvsAccess})
	}()
	waitFor(t, "the userspace and ipvs modes' rules removed", func() bool {
		nat, _ := kernel.Save(ctx, "nat")
		filter, _ := kernel.Save(ctx, "filter")
		return kernel.restoredOnce() && !strings.Contains(string(nat), "KUBE-PORTALS") &&
			!strings.Contains(string(nat), "KUBE-LOAD-BALANCER") && !strings.Contains(string(filter), "KUBE-IPVS-FILTER")
	})
	select {
	case <-linkDeleted:
	case <-time.After(10 * time.Second):
		t.Fatal("kube-ipvs0 was never deleted")
	}
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

// TestRunDualStack: the iptables mode proxies a dual-stack Service in
// both families, each in its own iptables, to the endpoints of its own
// family; without ip6tables it runs IPv4 only.
func TestRunDualStack(t *testing.T) {
	v6Pod := netip.MustParseAddrPort("[fd00:10:244:1::2]:8080")
	objects := func() []runtime.Object {
		return []runtime.Object{
			&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: "192.168.77.1"}, {Type: v1.NodeInternalIP, Address: "fd00:77::1"}}}},
			Service("default", "web", webIP.String(), Port("http", v1.ProtocolTCP, 80, 0), ClusterIPs(webIP.String(), "fd00:96::20")),
			Slice("default", "web", "web-v4", SlicePort("http", v1.ProtocolTCP, 8080), Endpoint(webPod.Addr().String(), "node-1")),
			Slice("default", "web", "web-v6", AddressType(discovery.AddressTypeIPv6), SlicePort("http", v1.ProtocolTCP, 8080), Endpoint(v6Pod.Addr().String(), "node-1")),
		}
	}
	reaches := func(kernel utiliptables.Executor, src netip.Addr, dst, want netip.AddrPort) bool {
		ok, err := dnatTo(kernel, src, dst, want)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	run := func(t *testing.T, os OS) (*fake.Clientset, func()) {
		ctx, cancel := context.WithCancel(t.Context())
		o := Defaults()
		o.HostnameOverride = "node-1"
		o.MetricsBindAddress, o.HealthzBindAddress = freeport.Addr(t), freeport.Addr(t)
		os.Conntrack, os.Interfaces, os.HealthCheckListener = &conntrack.Fake{}, StaticInterfaces{}, &healthcheck.Loopback{}
		done := make(chan error, 1)
		client := fake.NewClientset(objects()...)
		go func() { done <- RunWith(ctx, o, client, os) }()
		return client, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		}
	}
	v4Client, v6Client := netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("fd00:10:244:1::5")
	v4Service, v6Service := netip.AddrPortFrom(webIP, 80), netip.MustParseAddrPort("[fd00:96::20]:80")

	t.Run("both families", func(t *testing.T) {
		v4, v6 := iptablestest.NewFake(), iptablestest.NewFake()
		client, stop := run(t, OS{IPTables: v4, IP6Tables: v6})
		defer stop()
		waitFor(t, "the IPv4 rules", func() bool { return reaches(v4, v4Client, v4Service, webPod) })
		waitFor(t, "the IPv6 rules", func() bool { return reaches(v6, v6Client, v6Service, v6Pod) })
		// A change to an IPv4-only Service is not the IPv6 side's: no
		// ip6tables-restore for it.
		n4, n6 := v4.RestoreCount(), v6.RestoreCount()
		only4 := Service("default", "v4only", "10.96.0.21", Port("http", v1.ProtocolTCP, 80, 0))
		if _, err := client.CoreV1().Services("default").Create(t.Context(), only4, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the IPv4 side's sync of the IPv4-only Service", func() bool { return v4.RestoreCount() > n4 })
		time.Sleep(300 * time.Millisecond) // the IPv6 side syncs right after, if it does
		if n := v6.RestoreCount() - n6; n != 0 {
			t.Errorf("%d ip6tables restores for an IPv4-only Service", n)
		}
		for name, kernel := range map[string]*iptablestest.Fake{"ip6tables": v6, "iptables": v4} {
			data, _ := kernel.Save(context.Background(), "nat")
			other := "fd00"
			if name == "ip6tables" {
				other = "10.244."
			}
			if strings.Contains(string(data), other) {
				t.Errorf("%s has the other family's addresses:\n%s", name, data)
			}
		}
	})
	t.Run("no ip6tables", func(t *testing.T) {
		v4, v6 := iptablestest.NewFake(), iptablestest.NewFake()
		v6.FailRestore = func([]byte) error { return errors.New("ip6tables-restore: not here") }
		_, stop := run(t, OS{IPTables: v4, IP6Tables: failingSave{v6}})
		defer stop()
		waitFor(t, "the IPv4 rules", func() bool { return reaches(v4, v4Client, v4Service, webPod) })
		if n := v6.RestoreCount(); n != 0 {
			t.Errorf("%d restores into an ip6tables that does not work", n)
		}
	})
}

// failingSave is an ip6tables that cannot even list its rules.
type failingSave struct{ *iptablestest.Fake }

func (failingSave) Save(context.Context, string) ([]byte, error) {
	return nil, errors.New("ip6tables-save: not here")
}
