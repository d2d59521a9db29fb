package ebpf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/bpflb"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// Maps is what the proxier writes: the load balancer's maps
// (*bpflb.LB), or a fake in tests.
type Maps interface {
	PutServices(keys []bpflb.ServiceKey, vals []bpflb.Service) error
	DeleteServices(keys []bpflb.ServiceKey) error
	PutBackends(sets []bpflb.BackendSet) error
	DeleteBackends(id uint32, gen uint8, from, to int) error
	PutMaglev(id uint32, gen uint8, table []uint16) error
	DeleteMaglev(id uint32, gen uint8) error
	PutRanges(id uint32, ranges []netip.Prefix) error
	DeleteRanges(id uint32, ranges []netip.Prefix) error
	ClearStats(id uint32) error
	Stats(id uint32) (bpflb.Stats, error)
	Dump() (bpflb.Dump, error)
	Sizes() bpflb.Sizes
}

// Kernel is what the proxiers of both families share: one set of maps
// (their keys carry the family) and the ids of its backend sets.
type Kernel struct {
	Maps Maps
	// Fresh says the maps were made empty by this process: a first full
	// sync has nothing to reconcile, and ids never given out have their
	// counters at zero.
	Fresh bool
	// Attached reports whether the programs are still attached; the
	// canary.
	Attached func() (bool, error)
	// ForgetUDP, when set, is called after a write with the UDP
	// backends that sets no longer hold: it moves their clients to live
	// ones (flows from outside forgotten, connected sockets destroyed).
	ForgetUDP func([]netip.AddrPort) error

	mu sync.Mutex
	// names are the backend set of each id in use: the ids in use, and
	// the counters' labels.
	names map[uint32]TargetName
	next  uint32
	freed []uint32
}

// NewKernel shares maps between the families' proxiers.
func NewKernel(m Maps, attached func() (bool, error)) *Kernel {
	return &Kernel{Maps: m, Attached: attached, names: map[uint32]TargetName{}, next: 1}
}

// Stats reads the counters of every backend set in use. A set's
// counters start at zero when it is made, and go with it.
func (k *Kernel) Stats() map[TargetName]bpflb.Stats {
	k.mu.Lock()
	names := maps.Clone(k.names)
	k.mu.Unlock()
	out := make(map[TargetName]bpflb.Stats, len(names))
	for id, n := range names {
		if s, err := k.Maps.Stats(id); err == nil {
			out[n] = s
		}
	}
	return out
}

// alloc takes an id for the new backend set name, zeroing its counters.
func (k *Kernel) alloc(name TargetName) (uint32, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var id uint32
	reused := len(k.freed) > 0
	switch {
	case reused:
		id, k.freed = k.freed[len(k.freed)-1], k.freed[:len(k.freed)-1]
	case int(k.next) < k.Maps.Sizes().IDs:
		id = k.next
		k.next++
	default:
		return 0, fmt.Errorf("ebpf: all %d backend set ids are in use", k.Maps.Sizes().IDs-1)
	}
	if !k.Fresh || reused {
		if err := k.Maps.ClearStats(id); err != nil {
			k.freed = append(k.freed, id)
			return 0, err
		}
	}
	k.names[id] = name
	return id, nil
}

func (k *Kernel) free(id uint32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.names[id]; ok {
		delete(k.names, id)
		k.freed = append(k.freed, id)
	}
}

func (k *Kernel) inUse(id uint32) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.names[id]
	return ok
}

// ProxierConfig assembles an ebpf-mode proxier of one family.
type ProxierConfig struct {
	Rules  Config
	Sync   proxy.SyncerConfig
	Kernel *Kernel
}

// Proxier keeps the maps in line with the tracker's snapshots of one
// family: a proxy.Syncer whose mode writes map entries.
type Proxier struct {
	*proxy.Syncer
	w *writer
}

// written is a backend set as the maps hold it.
type written struct {
	id     uint32
	gen    uint8
	target Target
}

// writer is the ebpf mode of a Syncer.
type writer struct {
	cfg     ProxierConfig
	log     *slog.Logger
	targets map[TargetName]*written
	keys    map[bpflb.ServiceKey]TargetName
	flags   map[bpflb.ServiceKey]bpflb.Flags
	ports   map[svcstate.ServicePortName][]bpflb.ServiceKey
	// lost holds, per address, the service ports that claim it but lost
	// it to another: built again when the holder changes.
	lost map[bpflb.ServiceKey]map[svcstate.ServicePortName]bool
	// wrote: Apply has written before (its first write into fresh maps
	// has nothing to reconcile).
	wrote bool
	// nEndpoints counts the backends of every set written, for the
	// metrics.
	nEndpoints int
	// clean says the maps hold exactly what targets and keys say; false
	// after a failed write, until a full sync has reconciled them.
	clean bool
}

// NewProxier checks cfg and returns a Proxier whose first sync is full.
func NewProxier(cfg ProxierConfig) (*Proxier, error) {
	if err := cfg.Rules.Validate(); err != nil {
		return nil, err
	}
	if cfg.Sync.Tracker == nil || cfg.Kernel == nil {
		return nil, errors.New("ebpf: proxier needs a tracker and maps")
	}
	cfg.Rules.NodeConfig = cfg.Rules.NodeConfig.WithDefaults()
	cfg.Sync.Mode, cfg.Sync.Family = "ebpf", cfg.Rules.Family
	w := &writer{cfg: cfg, targets: map[TargetName]*written{}, keys: map[bpflb.ServiceKey]TargetName{}, flags: map[bpflb.ServiceKey]bpflb.Flags{},
		ports: map[svcstate.ServicePortName][]bpflb.ServiceKey{}, lost: map[bpflb.ServiceKey]map[svcstate.ServicePortName]bool{}}
	s := proxy.NewSyncer(cfg.Sync, w)
	w.log = s.Logger()
	return &Proxier{Syncer: s, w: w}, nil
}

// Intact reports whether the programs are still attached.
func (w *writer) Intact(context.Context) (bool, error) {
	if w.cfg.Kernel.Attached == nil {
		return true, nil
	}
	return w.cfg.Kernel.Attached()
}

// Apply writes the changed service ports' entries, or reconciles all of
// them with the maps when the write is full. Per backend set whose
// backends change, the new ones go to the other generation's slots, then
// the service entries switch to it, then the old slots go: a program
// sees the whole old set or the whole new one.
func (w *writer) Apply(_ context.Context, wr proxy.Write) (proxy.Written, error) {
	full := wr.Full || !w.clean
	var only map[svcstate.ServicePortName]struct{}
	if !full {
		if len(wr.Changed) == 0 {
			return proxy.Written{}, nil
		}
		// A port that lost an address to one that changes now may get
		// it: it is built again too.
		only = maps.Clone(wr.Changed)
		for n := range wr.Changed {
			for _, k := range w.ports[n] {
				for loser := range w.lost[k] {
					only[loser] = struct{}{}
				}
			}
		}
	}
	table := Build(w.cfg.Rules, wr.Snapshot, only)
	for !full {
		// An address another service port holds: that one is built too,
		// so that the build decides between them as a full one would.
		grew := false
		for k, name := range table.Keys {
			if owner, ok := w.keys[k]; ok && owner.Port != name.Port {
				if _, in := only[owner.Port]; !in {
					only[owner.Port] = struct{}{}
					grew = true
				}
			}
		}
		if !grew {
			break
		}
		table = Build(w.cfg.Rules, wr.Snapshot, only)
	}
	// From here on, a failure leaves the maps between two states: only a
	// full sync, which reconciles them with what the kernel holds, may
	// follow.
	w.clean = false
	var ports []svcstate.ServicePortName
	if full {
		for n := range w.ports {
			ports = append(ports, n)
		}
		for n := range table.Ports {
			if _, ok := w.ports[n]; !ok {
				ports = append(ports, n)
			}
		}
	} else {
		for n := range only {
			ports = append(ports, n)
		}
	}
	for _, c := range table.Conflicts {
		w.log.Warn("two service ports claim one address; the first keeps it", "address", c.Key.String(), "kept", c.Kept.String(), "lost", c.Lost.String())
	}
	first := !w.wrote
	w.wrote = true
	st, err := w.write(table, ports)
	if err == nil && full && !(first && w.cfg.Kernel.Fresh) {
		err = w.reconcile()
	}
	if err != nil {
		return proxy.Written{}, err
	}
	if len(st.udpGone) > 0 && w.cfg.Kernel.ForgetUDP != nil {
		slices.SortFunc(st.udpGone, netip.AddrPort.Compare)
		st.udpGone = slices.Compact(st.udpGone)
		if err := w.cfg.Kernel.ForgetUDP(st.udpGone); err != nil {
			// The maps are right; only clients of the removed backends
			// wait for their own timeouts.
			w.log.Warn("could not move UDP clients off removed endpoints", "endpoints", len(st.udpGone), "err", err)
		}
	}
	if full {
		clear(w.lost)
	} else {
		for k, losers := range w.lost {
			for n := range only {
				delete(losers, n)
			}
			if len(losers) == 0 {
				delete(w.lost, k)
			}
		}
	}
	for _, c := range table.Conflicts {
		if w.lost[c.Key] == nil {
			w.lost[c.Key] = map[svcstate.ServicePortName]bool{}
		}
		w.lost[c.Key][c.Lost] = true
	}
	w.clean = true
	return proxy.Written{
		Full: full,
		Stats: proxy.SyncStats{ServicePorts: len(w.ports), Endpoints: w.nEndpoints,
			NoLocal: map[string]int{"internal": table.Stats.NoLocalInternal}},
		Reachable: func(n svcstate.ServicePortName) (int, bool) {
			r, ok := table.Stats.Reachable[n]
			return r, ok
		},
		Log: []any{"entriesWritten", st.entries, "entriesDeleted", st.deleted, "backendSetsWritten", st.sets, "conflicts", len(table.Conflicts)},
	}, nil
}

type writeStats struct {
	entries, deleted, sets int
	// udpGone are the UDP backends sets no longer hold.
	udpGone []netip.AddrPort
}

// write brings the entries of ports in line with table.
func (w *writer) write(table Table, ports []svcstate.ServicePortName) (writeStats, error) {
	m := w.cfg.Kernel.Maps
	var st writeStats
	// The backend sets of these ports, before and after.
	oldTargets := map[TargetName]bool{}
	for _, n := range ports {
		for _, k := range w.ports[n] {
			oldTargets[w.keys[k]] = true
		}
	}
	// 1. New and changed backend sets: their slots in the generation
	// no entry points at.
	var made []TargetName
	flipped := map[TargetName]bool{}
	var sets []bpflb.BackendSet
	for name, t := range table.Targets {
		cur := w.targets[name]
		switch {
		case cur == nil:
			id, err := w.cfg.Kernel.alloc(name)
			if err != nil {
				return st, err
			}
			// Until its slots are written, the set holds no backend.
			w.targets[name] = &written{id: id, target: Target{Verdict: t.Verdict}}
			sets = append(sets, bpflb.BackendSet{ID: id, Backends: t.Backends})
			if err := m.PutRanges(id, t.Ranges); err != nil {
				return st, err
			}
			made = append(made, name)
			st.sets++
			continue
		case !slices.Equal(cur.target.Backends, t.Backends):
			sets = append(sets, bpflb.BackendSet{ID: cur.id, Gen: cur.gen ^ 1, Backends: t.Backends})
			flipped[name] = true
			st.sets++
		}
		if !slices.Equal(cur.target.Ranges, t.Ranges) {
			// The new ranges, then the old ones that go: for a moment,
			// both admit.
			if err := m.PutRanges(cur.id, t.Ranges); err != nil {
				return st, err
			}
			gone := slices.DeleteFunc(slices.Clone(cur.target.Ranges), func(r netip.Prefix) bool { return slices.Contains(t.Ranges, r) })
			if err := m.DeleteRanges(cur.id, gone); err != nil {
				return st, err
			}
		}
	}
	if err := m.PutBackends(sets); err != nil {
		return st, err
	}
	// The Maglev tables of those slots, before any entry points at them.
	for _, set := range sets {
		name := w.nameOf(set.ID)
		if t := table.Targets[name]; t.Maglev {
			if err := m.PutMaglev(set.ID, set.Gen, maglevTable(t.Backends)); err != nil {
				return st, err
			}
		}
	}
	for _, name := range made {
		t := table.Targets[name]
		w.targets[name].target = t
		w.nEndpoints += len(t.Backends)
	}
	// 2. The service entries: new ones, and those of changed sets.
	var keys []bpflb.ServiceKey
	var vals []bpflb.Service
	for k, name := range table.Keys {
		t := table.Targets[name]
		cur := w.targets[name]
		gen := cur.gen
		if flipped[name] {
			gen ^= 1
		} else if old, ok := w.keys[k]; ok && old == name && w.flags[k] == table.Flags[k] && cur.target.equal(t) {
			continue
		}
		keys = append(keys, k)
		vals = append(vals, entryOf(cur.id, gen, t, table.Flags[k]))
	}
	// Every key of a flipped set is rewritten: a set belongs to one
	// port, and table holds all of that port's keys.
	if err := m.PutServices(keys, vals); err != nil {
		return st, err
	}
	st.entries = len(keys)
	// 3. Entries no longer wanted.
	var gone []bpflb.ServiceKey
	for _, n := range ports {
		for _, k := range w.ports[n] {
			if _, ok := table.Keys[k]; !ok {
				gone = append(gone, k)
			}
		}
	}
	if err := m.DeleteServices(gone); err != nil {
		return st, err
	}
	st.deleted = len(gone)
	for _, k := range gone {
		delete(w.keys, k)
		delete(w.flags, k)
	}
	for k, name := range table.Keys {
		w.keys[k] = name
		if f := table.Flags[k]; f != 0 {
			w.flags[k] = f
		} else {
			delete(w.flags, k)
		}
	}
	for _, n := range ports {
		if ks, ok := table.Ports[n]; ok {
			w.ports[n] = ks
		} else {
			delete(w.ports, n)
		}
	}
	// 4. Old slots of flipped sets, and sets no entry names any more.
	for name := range flipped {
		cur := w.targets[name]
		if name.Port.Protocol == v1.ProtocolUDP {
			for _, b := range cur.target.Backends {
				if !slices.Contains(table.Targets[name].Backends, b) {
					st.udpGone = append(st.udpGone, b)
				}
			}
		}
		if err := m.DeleteBackends(cur.id, cur.gen, 0, len(cur.target.Backends)); err != nil {
			return st, err
		}
		if err := m.DeleteMaglev(cur.id, cur.gen); err != nil {
			return st, err
		}
		cur.gen ^= 1
	}
	for name, t := range table.Targets {
		cur := w.targets[name]
		w.nEndpoints += len(t.Backends) - len(cur.target.Backends)
		cur.target = t
	}
	for name := range oldTargets {
		if _, ok := table.Targets[name]; ok {
			continue
		}
		cur := w.targets[name]
		if cur == nil {
			continue
		}
		if err := m.DeleteBackends(cur.id, cur.gen, 0, len(cur.target.Backends)); err != nil {
			return st, err
		}
		if err := m.DeleteRanges(cur.id, cur.target.Ranges); err != nil {
			return st, err
		}
		if err := m.DeleteMaglev(cur.id, cur.gen); err != nil {
			return st, err
		}
		if name.Port.Protocol == v1.ProtocolUDP {
			st.udpGone = append(st.udpGone, cur.target.Backends...)
		}
		delete(w.targets, name)
		w.nEndpoints -= len(cur.target.Backends)
		w.cfg.Kernel.free(cur.id)
	}
	return st, nil
}

// nameOf is the set written at id, during a write.
func (w *writer) nameOf(id uint32) TargetName {
	w.cfg.Kernel.mu.Lock()
	defer w.cfg.Kernel.mu.Unlock()
	return w.cfg.Kernel.names[id]
}

// entryOf is the service entry of a set written at id's generation gen.
func entryOf(id uint32, gen uint8, t Target, flags bpflb.Flags) bpflb.Service {
	return bpflb.Service{ID: id, Count: uint16(len(t.Backends)), Gen: gen, Verdict: t.Verdict, Affinity: t.Affinity, Flags: flags}
}

// reconcile deletes what the maps hold of this family beyond what the
// writer wrote: entries a failed sync or an earlier proxy left.
func (w *writer) reconcile() error {
	m := w.cfg.Kernel.Maps
	d, err := m.Dump()
	if err != nil {
		return err
	}
	is6 := w.cfg.Rules.Family == v1.IPv6Protocol
	var stale []bpflb.ServiceKey
	var fix []bpflb.ServiceKey
	var fixVals []bpflb.Service
	for k, v := range d.Services {
		if k.Addr.Is6() != is6 {
			continue
		}
		name, ok := w.keys[k]
		if !ok {
			stale = append(stale, k)
			continue
		}
		t := w.targets[name]
		want := entryOf(t.id, t.gen, t.target, w.flags[k])
		if v != want {
			fix, fixVals = append(fix, k), append(fixVals, want)
		}
	}
	// Entries the writer holds that the maps lost.
	for k, name := range w.keys {
		if _, ok := d.Services[k]; !ok {
			t := w.targets[name]
			fix = append(fix, k)
			fixVals = append(fixVals, entryOf(t.id, t.gen, t.target, w.flags[k]))
		}
	}
	// Backend slots, tables and ranges first, then the entries that
	// point at them.
	for _, t := range w.targets {
		if t.target.Maglev {
			if err := m.PutMaglev(t.id, t.gen, maglevTable(t.target.Backends)); err != nil {
				return err
			}
		}
		have := d.Ranges[t.id]
		if missing := slices.DeleteFunc(slices.Clone(t.target.Ranges), func(r netip.Prefix) bool { return slices.Contains(have, r) }); len(missing) > 0 {
			if err := m.PutRanges(t.id, missing); err != nil {
				return err
			}
		}
		if extra := slices.DeleteFunc(slices.Clone(have), func(r netip.Prefix) bool { return slices.Contains(t.target.Ranges, r) }); len(extra) > 0 {
			if err := m.DeleteRanges(t.id, extra); err != nil {
				return err
			}
		}
		ok := true
		for i, b := range t.target.Backends {
			if d.Backends[bpflb.BackendKey{ID: t.id, Slot: uint16(i), Gen: t.gen}] != b {
				ok = false
			}
		}
		if !ok {
			if err := m.PutBackends([]bpflb.BackendSet{{ID: t.id, Gen: t.gen, Backends: t.target.Backends}}); err != nil {
				return err
			}
		}
	}
	if err := m.PutServices(fix, fixVals); err != nil {
		return err
	}
	if err := m.DeleteServices(stale); err != nil {
		return err
	}
	// Slots of no set: of ids no proxier uses, or past a set's count or
	// in its other generation.
	wanted := map[bpflb.BackendKey]bool{}
	for _, t := range w.targets {
		for i := range t.target.Backends {
			wanted[bpflb.BackendKey{ID: t.id, Slot: uint16(i), Gen: t.gen}] = true
		}
	}
	mine := map[uint32]bool{}
	for _, t := range w.targets {
		mine[t.id] = true
	}
	for bk := range d.Backends {
		if wanted[bk] || (!mine[bk.ID] && w.cfg.Kernel.inUse(bk.ID)) {
			continue
		}
		if err := m.DeleteBackends(bk.ID, bk.Gen, int(bk.Slot), int(bk.Slot)+1); err != nil {
			return err
		}
	}
	for id, rs := range d.Ranges {
		if !mine[id] && !w.cfg.Kernel.inUse(id) {
			if err := m.DeleteRanges(id, rs); err != nil {
				return err
			}
		}
	}
	return nil
}
