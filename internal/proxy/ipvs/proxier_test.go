package ipvs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/ipset"
	"github.com/svcnet/svcnet/internal/iptables/iptablestest"
	kipvs "github.com/svcnet/svcnet/internal/ipvs"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/ipvs"
	"github.com/svcnet/svcnet/internal/proxy/proxytest"
	st "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

// fakeIPVS is IPVS in memory; connections are set by the test.
type fakeIPVS struct {
	svcs  map[kipvs.Key]kipvs.Service
	dests map[kipvs.Key]map[netip.AddrPort]kipvs.Destination
	// reads counts the dumps (Services, Destinations), writes the rest.
	reads, writes int
}

func newFakeIPVS() *fakeIPVS {
	return &fakeIPVS{svcs: map[kipvs.Key]kipvs.Service{}, dests: map[kipvs.Key]map[netip.AddrPort]kipvs.Destination{}}
}

func (f *fakeIPVS) Services() ([]kipvs.Service, error) {
	f.reads++
	var out []kipvs.Service
	for _, s := range f.svcs {
		out = append(out, s)
	}
	return out, nil
}
func (f *fakeIPVS) AddService(s kipvs.Service) error {
	f.writes++
	if _, ok := f.svcs[s.Key()]; ok {
		return errors.New("exists")
	}
	f.svcs[s.Key()], f.dests[s.Key()] = s, map[netip.AddrPort]kipvs.Destination{}
	return nil
}
func (f *fakeIPVS) UpdateService(s kipvs.Service) error { f.writes++; f.svcs[s.Key()] = s; return nil }
func (f *fakeIPVS) DeleteService(s kipvs.Service) error {
	f.writes++
	delete(f.svcs, s.Key())
	delete(f.dests, s.Key())
	return nil
}
func (f *fakeIPVS) Destinations(s kipvs.Service) ([]kipvs.Destination, error) {
	f.reads++
	var out []kipvs.Destination
	for _, d := range f.dests[s.Key()] {
		out = append(out, d)
	}
	return out, nil
}
func (f *fakeIPVS) AddDestination(s kipvs.Service, d kipvs.Destination) error {
	f.writes++
	f.dests[s.Key()][d.AddrPort()] = d
	return nil
}
func (f *fakeIPVS) UpdateDestination(s kipvs.Service, d kipvs.Destination) error {
	f.writes++
	cur := f.dests[s.Key()][d.AddrPort()]
	cur.Weight = d.Weight
	f.dests[s.Key()][d.AddrPort()] = cur
	return nil
}
func (f *fakeIPVS) DeleteDestination(s kipvs.Service, d kipvs.Destination) error {
	f.writes++
	delete(f.dests[s.Key()], d.AddrPort())
	return nil
}

type fakeLinks struct {
	bound   []netip.Addr
	deleted bool // the link was deleted: EnsureDummy recreates it
}

func (f *fakeLinks) EnsureDummy(string) (bool, error) {
	created := f.deleted
	f.deleted = false
	return created, nil
}
func (f *fakeLinks) Addresses(string, v1.IPFamily) ([]netip.Addr, error) {
	return slices.Clone(f.bound), nil
}
func (f *fakeLinks) AddAddress(_ string, a netip.Addr) error {
	f.bound = append(f.bound, a)
	return nil
}
func (f *fakeLinks) DeleteAddress(_ string, a netip.Addr) error {
	f.bound = slices.DeleteFunc(f.bound, func(b netip.Addr) bool { return b == a })
	return nil
}
func (f *fakeLinks) OtherAddresses(string, v1.IPFamily) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1"), proxytest.NodeIP}, nil
}

type fakeSets struct {
	restores [][]ipset.Set
	updates  [][]ipset.Delta
	fail     error // the next Update's
}

func (f *fakeSets) Restore(_ context.Context, sets []ipset.Set) error {
	if len(sets) > 0 {
		f.restores = append(f.restores, sets)
	}
	return nil
}

func (f *fakeSets) Update(_ context.Context, ds []ipset.Delta) error {
	if err := f.fail; err != nil {
		f.fail = nil
		return err
	}
	if len(ds) > 0 {
		f.updates = append(f.updates, ds)
	}
	return nil
}

// TestProxier drives the proxier against fakes: a first sync writes it
// all, a change writes only what differs, a removed real server with a
// connection drains at weight 0 until it has none (or the deadline),
// a foreign virtual server in an excluded CIDR stays, and a removed
// Service takes its virtual servers and address with it.
func TestProxier(t *testing.T) {
	tr := proxytest.QuietTracker()
	fi, links, sets, ipt := newFakeIPVS(), &fakeLinks{}, &fakeSets{}, iptablestest.NewFake()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	foreign := kipvs.Service{Addr: netip.MustParseAddr("192.0.2.80"), Protocol: kipvs.TCP, Port: 80, Scheduler: "wrr"}
	stray := kipvs.Service{Addr: netip.MustParseAddr("198.18.0.1"), Protocol: kipvs.TCP, Port: 80, Scheduler: "rr"}
	_ = fi.AddService(foreign)
	_ = fi.AddService(stray)
	p, err := ipvs.NewProxier(ipvs.ProxierConfig{
		Sync:             proxy.SyncerConfig{Tracker: tr, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }},
		Rules:            ipvs.Config{NodeConfig: proxytest.Node, AllNodePortAddresses: true},
		IPVS:             fi,
		Links:            links,
		Sets:             sets,
		IPTables:         ipt,
		ExcludeCIDRs:     []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
		GracefulDeadline: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sync := func(step string) {
		t.Helper()
		if err := p.Sync(ctx); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	svc := st.Service("ns", "web", "10.96.0.10", st.Port("http", v1.ProtocolTCP, 80, 30080), st.Type(v1.ServiceTypeNodePort))
	slice := func(ips ...string) {
		opts := []st.SliceOption{st.SlicePort("http", v1.ProtocolTCP, 8080)}
		for _, ip := range ips {
			opts = append(opts, st.Endpoint(ip, "node-b"))
		}
		tr.OnEndpointSliceUpdate(nil, st.Slice("ns", "web", "web-1", opts...))
	}
	tr.OnServiceAdd(svc)
	slice("10.244.2.1", "10.244.2.2")
	sync("first")

	cip := kipvs.Key{Addr: netip.MustParseAddr("10.96.0.10"), Protocol: kipvs.TCP, Port: 80}
	np := kipvs.Key{Addr: proxytest.NodeIP, Protocol: kipvs.TCP, Port: 30080}
	dests := func(k kipvs.Key) string {
		var out []string
		for a, d := range fi.dests[k] {
			out = append(out, a.String()+"/"+string(rune('0'+d.Weight)))
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	if got := dests(cip); got != "10.244.2.1:8080/1 10.244.2.2:8080/1" {
		t.Errorf("cluster IP real servers %q", got)
	}
	if _, ok := fi.svcs[np]; !ok {
		t.Error("no node-port virtual server on the node address")
	}
	if _, ok := fi.svcs[kipvs.Key{Addr: netip.MustParseAddr("127.0.0.1"), Protocol: kipvs.TCP, Port: 30080}]; ok {
		t.Error("a node-port virtual server on loopback")
	}
	if _, ok := fi.svcs[foreign.Key()]; !ok {
		t.Error("a virtual server in --ipvs-exclude-cidrs was deleted")
	}
	if _, ok := fi.svcs[stray.Key()]; ok {
		t.Error("a stray virtual server outside the excluded CIDRs was kept")
	}
	if !slices.Equal(links.bound, []netip.Addr{netip.MustParseAddr("10.96.0.10")}) {
		t.Errorf("bound %v", links.bound)
	}
	if n := len(sets.restores[0]); n != len(ipvs.SetNames(v1.IPv4Protocol)) {
		t.Errorf("first sync wrote %d sets, want all", n)
	}
	restores := len(ipt.Restores)

	// A change of endpoints: the connection to .2 drains.
	fi.dests[cip][netip.MustParseAddrPort("10.244.2.2:8080")] = kipvs.Destination{Addr: netip.MustParseAddr("10.244.2.2"), Port: 8080, Weight: 1, ActiveConns: 1}
	slice("10.244.2.1", "10.244.2.3")
	now = now.Add(time.Second)
	sync("endpoint change")
	if got := dests(cip); got != "10.244.2.1:8080/1 10.244.2.2:8080/0 10.244.2.3:8080/1" {
		t.Errorf("after the change: %q, want .2 draining at weight 0", got)
	}
	if got := dests(np); got != "10.244.2.1:8080/1 10.244.2.3:8080/1" {
		t.Errorf("node port (no connections): %q, want .2 deleted at once", got)
	}
	if !p.Again() {
		t.Error("Draining() false while a real server drains")
	}
	if len(ipt.Restores) != restores {
		t.Error("an endpoint change rewrote the iptables rules, which did not change")
	}
	if len(sets.restores) != 1 {
		t.Errorf("an endpoint change replaced %d sets whole", len(sets.restores[len(sets.restores)-1]))
	}
	// Still connected: stays. Past the deadline: goes.
	now = now.Add(30 * time.Second)
	sync("still draining")
	if !strings.Contains(dests(cip), "10.244.2.2:8080/0") {
		t.Error("deleted before its connection ended or the deadline")
	}
	now = now.Add(time.Minute)
	sync("past the deadline")
	if strings.Contains(dests(cip), "10.244.2.2") || p.Again() {
		t.Errorf("past the deadline: %q, draining %v", dests(cip), p.Again())
	}

	// Back at weight 1 if it returns while draining.
	fi.dests[cip][netip.MustParseAddrPort("10.244.2.3:8080")] = kipvs.Destination{Addr: netip.MustParseAddr("10.244.2.3"), Port: 8080, Weight: 1, ActiveConns: 2}
	slice("10.244.2.1")
	sync("remove .3 with connections")
	slice("10.244.2.1", "10.244.2.3")
	sync(".3 back")
	if got := dests(cip); got != "10.244.2.1:8080/1 10.244.2.3:8080/1" {
		t.Errorf("returning endpoint: %q", got)
	}

	// The Service goes: its virtual servers and address go.
	tr.OnServiceDelete(svc)
	sync("service deleted")
	if _, ok := fi.svcs[cip]; ok || len(links.bound) != 0 {
		t.Errorf("after deletion: virtual server kept %v, bound %v", ok, links.bound)
	}
}

// TestProxierPartial checks that a sync between full ones touches only
// the virtual servers that changed, reading none back from the kernel,
// and that what someone else changes is repaired: a flushed virtual
// server by the next canary, a changed weight by the next full sync, a
// deleted kube-ipvs0 at once, and anything after a failed sync.
func TestProxierPartial(t *testing.T) {
	tr := proxytest.QuietTracker()
	fi, links, sets, ipt := newFakeIPVS(), &fakeLinks{}, &fakeSets{}, iptablestest.NewFake()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p, err := ipvs.NewProxier(ipvs.ProxierConfig{
		Sync:     proxy.SyncerConfig{Tracker: tr, FullSyncPeriod: time.Minute, CanaryPeriod: 10 * time.Second, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }},
		Rules:    ipvs.Config{NodeConfig: proxytest.Node},
		IPVS:     fi,
		Links:    links,
		Sets:     sets,
		IPTables: ipt,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sync := func(step string, advance time.Duration) {
		t.Helper()
		now = now.Add(advance)
		fi.reads, fi.writes = 0, 0
		if err := p.Sync(ctx); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	const n = 50
	ip := func(i int) string { return fmt.Sprintf("10.96.1.%d", i) }
	key := func(i int) kipvs.Key {
		return kipvs.Key{Addr: netip.MustParseAddr(ip(i)), Protocol: kipvs.TCP, Port: 80}
	}
	slice := func(i int, ep string) {
		tr.OnEndpointSliceUpdate(nil, st.Slice("ns", fmt.Sprint("s", i), fmt.Sprint("s", i, "-1"),
			st.SlicePort("http", v1.ProtocolTCP, 8080), st.Endpoint(ep, "node-b")))
	}
	for i := range n {
		tr.OnServiceAdd(st.Service("ns", fmt.Sprint("s", i), ip(i), st.Port("http", v1.ProtocolTCP, 80, 0)))
		slice(i, fmt.Sprintf("10.244.2.%d", i))
	}
	sync("first", 0)
	if fi.reads != 1 || fi.writes != 2*n {
		t.Errorf("the first sync: %d reads, %d writes; want 1 (the virtual servers) and %d", fi.reads, fi.writes, 2*n)
	}

	slice(7, "10.244.3.7")
	sync("one endpoint change", time.Second)
	if fi.reads != 1 || fi.writes != 2 {
		t.Errorf("one endpoint change: %d reads, %d writes; want 1 (its real servers) and 2 (one added, one deleted)", fi.reads, fi.writes)
	}
	if _, ok := fi.dests[key(7)][netip.MustParseAddrPort("10.244.3.7:8080")]; !ok {
		t.Error("the changed endpoint is not a real server")
	}

	tr.OnServiceAdd(st.Service("ns", "new", "10.96.2.1", st.Port("http", v1.ProtocolTCP, 80, 0)))
	tr.OnEndpointSliceUpdate(nil, st.Slice("ns", "new", "new-1", st.SlicePort("http", v1.ProtocolTCP, 8080), st.Endpoint("10.244.2.200", "node-b")))
	sync("a new Service", time.Second)
	if fi.reads != 0 || fi.writes != 2 || !slices.Contains(links.bound, netip.MustParseAddr("10.96.2.1")) {
		t.Errorf("a new Service: %d reads, %d writes, bound %v; want 0, 2 and its address", fi.reads, fi.writes, len(links.bound))
	}
	for _, d := range sets.updates[len(sets.updates)-1] {
		if len(d.Add) != 1 || !strings.HasPrefix(d.Add[0], "10.96.2.1") || len(d.Del) != 0 {
			t.Errorf("a new Service updated set %s with %+v, want only its cluster IP added", d.Name, d)
		}
	}
	if len(sets.restores) != 1 {
		t.Errorf("%d whole set restores, want only the first sync's", len(sets.restores))
	}

	// ipvsadm -D behind our back: the canary sees it.
	_ = fi.DeleteService(fi.svcs[key(3)])
	sync("within the canary period", time.Second)
	if _, ok := fi.svcs[key(3)]; ok {
		t.Fatal("a partial sync read the kernel back (the canary ran early)")
	}
	sync("canary", 10*time.Second)
	if _, ok := fi.svcs[key(3)]; !ok || len(fi.dests[key(3)]) != 1 {
		t.Errorf("after the canary the flushed virtual server is back: %v, %d real servers", ok, len(fi.dests[key(3)]))
	}

	// A weight changed behind our back: only a full sync compares it.
	d := netip.MustParseAddrPort("10.244.2.4:8080")
	fi.dests[key(4)][d] = kipvs.Destination{Addr: d.Addr(), Port: d.Port(), Weight: 5}
	sync("partial", 10*time.Second)
	if fi.dests[key(4)][d].Weight != 5 {
		t.Fatal("a partial sync rewrote an unchanged virtual server")
	}
	sync("full", time.Minute)
	if fi.dests[key(4)][d].Weight != 1 {
		t.Errorf("after a full sync the weight is %d, want 1", fi.dests[key(4)][d].Weight)
	}

	// kube-ipvs0 deleted: the canary sees it, and the link is recreated
	// with every address at once.
	links.deleted, links.bound = true, nil
	sync("link recreated", 10*time.Second)
	if len(links.bound) != n+1 {
		t.Errorf("after the link was recreated %d addresses are bound, want %d", len(links.bound), n+1)
	}

	// A failed sync: the next one compares everything.
	sets.fail = errors.New("ipset: boom")
	slice(9, "10.244.3.9")
	now = now.Add(time.Second)
	if err := p.Sync(ctx); err == nil {
		t.Fatal("the sync succeeded though the sets could not be written")
	}
	_ = fi.DeleteService(fi.svcs[key(5)])
	sync("after a failure", time.Second)
	if _, ok := fi.svcs[key(5)]; !ok || fi.reads < n {
		t.Errorf("the sync after a failure was not full: %d reads, virtual server restored %v", fi.reads, ok)
	}
	if _, ok := fi.dests[key(9)][netip.MustParseAddrPort("10.244.3.9:8080")]; !ok {
		t.Error("the change of the failed sync was not applied by the next")
	}
}
