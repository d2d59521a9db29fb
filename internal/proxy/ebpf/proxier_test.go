package ebpf_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/svcnet/svcnet/internal/bpflb"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/ebpf"
	"github.com/svcnet/svcnet/internal/proxy/proxytest"
	"github.com/svcnet/svcnet/internal/svcstate"
	st "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

// fakeMaps holds the maps in memory and checks, after every write, what
// the programs rely on: every service entry's slots are all there.
type fakeMaps struct {
	t        *testing.T
	services map[bpflb.ServiceKey]bpflb.Service
	backends map[bpflb.BackendKey]netip.AddrPort
	ranges   map[uint32]map[netip.Prefix]bool
	maglev   map[bpflb.BackendKey][]uint16 // by id and generation (slot 0)
	// failAfter fails the write after that many more (0: never).
	failAfter int
	writes    int
}

func newFakeMaps(t *testing.T) *fakeMaps {
	return &fakeMaps{t: t, services: map[bpflb.ServiceKey]bpflb.Service{}, backends: map[bpflb.BackendKey]netip.AddrPort{},
		ranges: map[uint32]map[netip.Prefix]bool{}, maglev: map[bpflb.BackendKey][]uint16{}}
}

var errInjected = errors.New("injected failure")

func (f *fakeMaps) op() error {
	f.writes++
	if f.failAfter > 0 {
		f.failAfter--
		if f.failAfter == 0 {
			return errInjected
		}
	}
	return nil
}

// whole checks that no entry points at a missing slot.
func (f *fakeMaps) whole(after string) {
	f.t.Helper()
	for k, v := range f.services {
		for i := range int(v.Count) {
			if _, ok := f.backends[bpflb.BackendKey{ID: v.ID, Slot: uint16(i), Gen: v.Gen}]; !ok {
				f.t.Fatalf("after %s: %s points at id %d gen %d slot %d, which is missing", after, k, v.ID, v.Gen, i)
			}
		}
		if t, ok := f.maglev[bpflb.BackendKey{ID: v.ID, Gen: v.Gen}]; v.Flags&bpflb.Maglev != 0 && v.Count > 0 && (!ok || len(t) != ebpf.MaglevSize) {
			f.t.Fatalf("after %s: %s asks for the Maglev table of id %d gen %d, which is missing", after, k, v.ID, v.Gen)
		}
	}
}

func (f *fakeMaps) PutServices(keys []bpflb.ServiceKey, vals []bpflb.Service) error {
	if err := f.op(); err != nil {
		return err
	}
	for i, k := range keys {
		f.services[k] = vals[i]
		f.whole("PutServices") // one entry at a time, as a reader may see them
	}
	return nil
}

func (f *fakeMaps) DeleteServices(keys []bpflb.ServiceKey) error {
	if err := f.op(); err != nil {
		return err
	}
	for _, k := range keys {
		delete(f.services, k)
	}
	return nil
}

func (f *fakeMaps) PutBackends(sets []bpflb.BackendSet) error {
	if err := f.op(); err != nil {
		return err
	}
	for _, s := range sets {
		for i, a := range s.Backends {
			f.backends[bpflb.BackendKey{ID: s.ID, Slot: uint16(i), Gen: s.Gen}] = a
		}
	}
	return nil
}

func (f *fakeMaps) DeleteBackends(id uint32, gen uint8, from, to int) error {
	if err := f.op(); err != nil {
		return err
	}
	for s := from; s < to; s++ {
		delete(f.backends, bpflb.BackendKey{ID: id, Slot: uint16(s), Gen: gen})
		f.whole(fmt.Sprintf("DeleteBackends(%d, %d, %d)", id, gen, s))
	}
	return nil
}

func (f *fakeMaps) PutMaglev(id uint32, gen uint8, table []uint16) error {
	if err := f.op(); err != nil {
		return err
	}
	f.maglev[bpflb.BackendKey{ID: id, Gen: gen}] = table
	return nil
}

func (f *fakeMaps) DeleteMaglev(id uint32, gen uint8) error {
	if err := f.op(); err != nil {
		return err
	}
	delete(f.maglev, bpflb.BackendKey{ID: id, Gen: gen})
	f.whole("DeleteMaglev")
	return nil
}

func (f *fakeMaps) PutRanges(id uint32, rs []netip.Prefix) error {
	if err := f.op(); err != nil {
		return err
	}
	for _, r := range rs {
		if f.ranges[id] == nil {
			f.ranges[id] = map[netip.Prefix]bool{}
		}
		f.ranges[id][r] = true
	}
	return nil
}

func (f *fakeMaps) DeleteRanges(id uint32, rs []netip.Prefix) error {
	if err := f.op(); err != nil {
		return err
	}
	for _, r := range rs {
		delete(f.ranges[id], r)
	}
	if len(f.ranges[id]) == 0 {
		delete(f.ranges, id)
	}
	return nil
}

func (f *fakeMaps) ClearStats(uint32) error           { return f.op() }
func (f *fakeMaps) Stats(uint32) (bpflb.Stats, error) { return bpflb.Stats{}, nil }
func (f *fakeMaps) Sizes() bpflb.Sizes                { return bpflb.Sizes{IDs: 1 << 16} }
func (f *fakeMaps) Dump() (bpflb.Dump, error) {
	d := bpflb.Dump{Services: map[bpflb.ServiceKey]bpflb.Service{}, Backends: map[bpflb.BackendKey]netip.AddrPort{}, Ranges: map[uint32][]netip.Prefix{}}
	for id, rs := range f.ranges {
		for r := range rs {
			d.Ranges[id] = append(d.Ranges[id], r)
		}
	}
	for k, v := range f.services {
		d.Services[k] = v
	}
	for k, v := range f.backends {
		d.Backends[k] = v
	}
	return d, nil
}

// matches checks that the maps hold exactly table: its entries, each
// with its set's backends, and no slot beyond them.
func (f *fakeMaps) matches(table ebpf.Table, family v1.IPFamily) {
	f.t.Helper()
	used := map[bpflb.BackendKey]bool{}
	rangesOf := map[uint32]bool{}
	n := 0
	for k, v := range f.services {
		if k.Addr.Is6() != (family == v1.IPv6Protocol) {
			continue
		}
		n++
		name, ok := table.Keys[k]
		if !ok {
			f.t.Errorf("stale entry %s", k)
			continue
		}
		tg := table.Targets[name]
		var got []netip.AddrPort
		for i := range int(v.Count) {
			bk := bpflb.BackendKey{ID: v.ID, Slot: uint16(i), Gen: v.Gen}
			used[bk] = true
			got = append(got, f.backends[bk])
		}
		if !slices.Equal(got, tg.Backends) || (len(got) == 0 && v.Verdict != tg.Verdict) || v.Affinity != tg.Affinity || v.Flags != table.Flags[k] {
			f.t.Errorf("%s (%s): backends %v verdict %d affinity %d flags %d, want %v %d %d %d", k, name, got, v.Verdict, v.Affinity, v.Flags,
				tg.Backends, tg.Verdict, tg.Affinity, table.Flags[k])
		}
		var ranges []netip.Prefix
		for r := range f.ranges[v.ID] {
			ranges = append(ranges, r)
		}
		slices.SortFunc(ranges, netip.Prefix.Compare)
		if !slices.Equal(ranges, tg.Ranges) {
			f.t.Errorf("%s (%s): ranges %v, want %v", k, name, ranges, tg.Ranges)
		}
		rangesOf[v.ID] = true
	}
	if n != len(table.Keys) {
		f.t.Errorf("%d entries, want %d", n, len(table.Keys))
	}
	for bk := range f.backends {
		if !used[bk] {
			f.t.Errorf("slot %+v is no entry's", bk)
		}
	}
	for id := range f.ranges {
		if !rangesOf[id] {
			f.t.Errorf("ranges of id %d, no entry's", id)
		}
	}
}

type world struct {
	t       *testing.T
	maps    *fakeMaps
	tracker *svcstate.Tracker
	proxier *ebpf.Proxier
	cfg     ebpf.Config
	kernel  *ebpf.Kernel
	// forgotten are the UDP backends the proxier asked to move clients
	// off.
	forgotten []netip.AddrPort
}

func newWorld(t *testing.T) *world { return newWorldWith(t, ebpf.Config{NodeConfig: proxytest.Node}) }

func newWorldWith(t *testing.T, cfg ebpf.Config) *world {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := &world{t: t, maps: newFakeMaps(t), cfg: cfg}
	w.kernel = ebpf.NewKernel(w.maps, nil)
	w.kernel.ForgetUDP = func(b []netip.AddrPort) error {
		w.forgotten = append(w.forgotten, b...)
		return nil
	}
	w.tracker = svcstate.NewTracker(svcstate.Config{NodeName: "node-a", Logger: quiet})
	p, err := ebpf.NewProxier(ebpf.ProxierConfig{
		Rules:  w.cfg,
		Sync:   proxy.SyncerConfig{Tracker: w.tracker, Logger: quiet},
		Kernel: w.kernel,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.proxier = p
	return w
}

// synced syncs and checks the maps against a full build.
func (w *world) synced() {
	w.t.Helper()
	if err := w.proxier.Sync(context.Background()); err != nil {
		w.t.Fatal(err)
	}
	snap, _ := w.tracker.Snapshot()
	w.maps.matches(ebpf.Build(w.cfg, snap, nil), v1.IPv4Protocol)
}

func TestProxierWrites(t *testing.T) {
	w := newWorld(t)
	for _, fx := range proxytest.Fixtures {
		if fx.Config != nil {
			continue // another node's configuration
		}
		proxytest.Feed(w.tracker, fx.Objects)
	}
	w.synced()
	// The maps as the kernel holds them trace as the table they were
	// built from.
	snap, _ := w.tracker.Snapshot()
	table := ebpf.Build(w.cfg, snap, nil)
	d, _ := w.maps.Dump()
	env := ebpf.Env{ClusterCIDR: w.cfg.ClusterCIDR}
	for _, fx := range proxytest.Fixtures {
		for _, c := range fx.Checks {
			want, got := ebpf.Trace(table, c.Pkt, env).Outcomes(), ebpf.Trace(ebpf.DumpSource(d), c.Pkt, env).Outcomes()
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s / %s: from the maps %v, from the table %v", fx.Name, c.Name, got, want)
			}
		}
	}
	// Scale web-1 up and down, one sync each: each change flips its set
	// to the other generation.
	w.tracker.OnServiceAdd(proxytest.WebService(1))
	for _, n := range []int{1, 3, 5, 2, 0, 4} {
		w.tracker.OnEndpointSliceAdd(proxytest.WebSlice(1, n, true))
		w.synced()
	}
	// Policy Local, affinity, then gone.
	w.tracker.OnServiceUpdate(proxytest.WebService(1), proxytest.WebService(1, st.InternalLocal()))
	w.synced()
	w.tracker.OnServiceUpdate(proxytest.WebService(1, st.InternalLocal()), proxytest.WebService(1, st.Affinity(30)))
	w.synced()
	w.tracker.OnServiceDelete(proxytest.WebService(1, st.Affinity(30)))
	w.synced()
	w.tracker.OnEndpointSliceDelete(proxytest.WebSlice(1, 4, true))
	w.synced()
}

// TestProxierRepairs: a write that fails halfway leaves the maps between
// two states, never with an entry pointing at missing slots, and the
// next sync, full, reconciles them; so does one after someone else
// changed the maps.
func TestProxierRepairs(t *testing.T) {
	for after := 1; after < 12; after++ {
		t.Run(fmt.Sprint("fail at write ", after), func(t *testing.T) {
			w := newWorld(t)
			w.tracker.OnServiceAdd(proxytest.WebService(1))
			w.tracker.OnEndpointSliceAdd(proxytest.WebSlice(1, 2, true))
			w.tracker.OnServiceAdd(proxytest.WebService(2))
			w.synced()
			w.maps.failAfter = after
			w.tracker.OnEndpointSliceAdd(proxytest.WebSlice(1, 3, true))
			w.tracker.OnServiceDelete(proxytest.WebService(2))
			w.tracker.OnServiceAdd(proxytest.WebService(3))
			w.tracker.OnEndpointSliceAdd(proxytest.WebSlice(3, 1, true))
			failed := w.proxier.Sync(context.Background()) != nil
			if failed != (w.maps.failAfter == 0) {
				t.Fatalf("sync failed %v, injected failure consumed %v", failed, w.maps.failAfter == 0)
			}
			w.maps.failAfter = 0
			w.synced()
		})
	}
	t.Run("someone else's entries", func(t *testing.T) {
		w := newWorld(t)
		w.tracker.OnServiceAdd(proxytest.WebService(1))
		w.tracker.OnEndpointSliceAdd(proxytest.WebSlice(1, 2, true))
		w.synced()
		stray := bpflb.ServiceKey{Addr: netip.MustParseAddr("10.96.9.9"), Port: 80, Proto: 6}
		w.maps.services[stray] = bpflb.Service{ID: 999}
		w.maps.backends[bpflb.BackendKey{ID: 999}] = netip.MustParseAddrPort("10.0.0.1:1")
		for k, v := range w.maps.services {
			if k != stray {
				v.Count = 1 // a backend lost
				w.maps.services[k] = v
			}
		}
		w.proxier.RequestFullSync()
		w.synced()
	})
}

// TestProxierConflicts: an address two Services claim goes to the first
// by name, in full and partial syncs alike, and to the other once the
// first lets it go.
func TestProxierConflicts(t *testing.T) {
	w := newWorld(t)
	ext := st.ExternalIPs("203.0.113.99")
	a := st.Service("default", "a", "10.96.0.1", st.Port("http", v1.ProtocolTCP, 80, 0), ext)
	b := st.Service("default", "b", "10.96.0.2", st.Port("http", v1.ProtocolTCP, 80, 0), ext)
	w.tracker.OnServiceAdd(b)
	w.tracker.OnEndpointSliceAdd(st.Slice("default", "b", "b-1", st.SlicePort("http", v1.ProtocolTCP, 8080), st.Endpoint("10.244.2.2", "node-b")))
	w.synced()
	w.tracker.OnServiceAdd(a) // a is first by name: it takes the address
	w.synced()
	w.tracker.OnServiceDelete(a)
	w.synced() // b has it again
	w.tracker.OnServiceAdd(a)
	w.proxier.RequestFullSync()
	w.synced()
}

// TestProxierForgetsUDP: the UDP backends a sync removes, and only
// those, are handed over for their clients to be moved.
func TestProxierForgetsUDP(t *testing.T) {
	w := newWorld(t)
	udp := v1.ProtocolUDP
	svc := st.Service("default", "dns", "10.96.0.53", st.Port("dns", udp, 53, 0), st.Port("dns-tcp", v1.ProtocolTCP, 53, 0))
	slice := func(ips ...string) *discovery.EndpointSlice {
		opts := []st.SliceOption{st.SlicePort("dns", udp, 5353), st.SlicePort("dns-tcp", v1.ProtocolTCP, 5353)}
		for _, ip := range ips {
			opts = append(opts, st.Endpoint(ip, "node-b"))
		}
		return st.Slice("default", "dns", "dns-1", opts...)
	}
	w.tracker.OnServiceAdd(svc)
	w.tracker.OnEndpointSliceAdd(slice("10.244.2.1", "10.244.2.2", "10.244.2.3"))
	w.synced()
	if len(w.forgotten) != 0 {
		t.Fatalf("forgot %v at the first sync", w.forgotten)
	}
	w.tracker.OnEndpointSliceUpdate(nil, slice("10.244.2.1", "10.244.2.3"))
	w.synced()
	if want := []netip.AddrPort{netip.MustParseAddrPort("10.244.2.2:5353")}; !slices.Equal(w.forgotten, want) {
		t.Errorf("forgot %v, want %v (the UDP port's removed endpoint, once)", w.forgotten, want)
	}
	w.forgotten = nil
	w.tracker.OnServiceDelete(svc)
	w.synced()
	if want := []netip.AddrPort{netip.MustParseAddrPort("10.244.2.1:5353"), netip.MustParseAddrPort("10.244.2.3:5353")}; !slices.Equal(w.forgotten, want) {
		t.Errorf("forgot %v, want %v", w.forgotten, want)
	}
}

// TestProxierMaglev: with Maglev, every outside set's entries point at a
// table written before them, through scaling and failures.
func TestProxierMaglev(t *testing.T) {
	w := newWorldWith(t, ebpf.Config{NodeConfig: proxytest.Node, Maglev: true})
	w.tracker.OnServiceAdd(proxytest.WebService(1))
	for _, n := range []int{3, 5, 2, 4} {
		w.tracker.OnEndpointSliceAdd(proxytest.WebSlice(1, n, true))
		w.synced()
	}
	tables := 0
	for k, v := range w.maps.services {
		if v.Flags&bpflb.Maglev != 0 {
			tables++
			if k.Scope != bpflb.Packet {
				t.Errorf("a socket entry %s with Maglev", k)
			}
		}
	}
	if tables == 0 {
		t.Error("no entry uses Maglev")
	}
	if len(w.maps.maglev) != 1 {
		var keys []bpflb.BackendKey
		for k := range w.maps.maglev {
			keys = append(keys, k)
		}
		t.Errorf("%d Maglev tables %v, want the outside set's one (old generations deleted)", len(keys), keys)
	}
	w.maps.failAfter = 3
	w.tracker.OnEndpointSliceAdd(proxytest.WebSlice(1, 1, true))
	_ = w.proxier.Sync(context.Background())
	w.maps.failAfter = 0
	w.synced()
}
