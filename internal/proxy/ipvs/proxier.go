package ipvs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/ipset"
	utiliptables "github.com/svcnet/svcnet/internal/iptables"
	kipvs "github.com/svcnet/svcnet/internal/ipvs"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// IPVS is the kernel's IP Virtual Server as the proxier uses it;
// *kipvs.Handle is one.
type IPVS interface {
	Services() ([]kipvs.Service, error)
	AddService(kipvs.Service) error
	UpdateService(kipvs.Service) error
	DeleteService(kipvs.Service) error
	Destinations(kipvs.Service) ([]kipvs.Destination, error)
	AddDestination(kipvs.Service, kipvs.Destination) error
	UpdateDestination(kipvs.Service, kipvs.Destination) error
	DeleteDestination(kipvs.Service, kipvs.Destination) error
}

// Links is the dummy link and the node's addresses; Netlink is the real
// one.
type Links interface {
	// EnsureDummy creates the dummy link (down) if it is missing, and
	// says whether it had to.
	EnsureDummy(name string) (created bool, err error)
	// Addresses lists the addresses of family f on link name.
	Addresses(name string, f v1.IPFamily) ([]netip.Addr, error)
	AddAddress(name string, a netip.Addr) error
	DeleteAddress(name string, a netip.Addr) error
	// OtherAddresses lists the node's addresses of family f on every link
	// but name.
	OtherAddresses(name string, f v1.IPFamily) ([]netip.Addr, error)
}

// Sets writes ipsets; *ipset.Runner is one.
type Sets interface {
	// Restore creates sets and replaces their contents whole.
	Restore(ctx context.Context, sets []ipset.Set) error
	// Update adds and deletes entries of existing sets.
	Update(ctx context.Context, ds []ipset.Delta) error
}

// ProxierConfig assembles an ipvs-mode proxier.
type ProxierConfig struct {
	Rules    Config
	Tracker  *svcstate.Tracker
	IPVS     IPVS
	Links    Links
	Sets     Sets
	IPTables utiliptables.Executor
	// ExcludeCIDRs (--ipvs-exclude-cidrs): virtual servers in them that
	// are not ours are left alone.
	ExcludeCIDRs []netip.Prefix
	// FullSyncPeriod is the longest time between two full syncs, which
	// compare everything with the kernel and rewrite what differs (jumps,
	// every set, the rules, every virtual server): state changed behind
	// the proxy's back is repaired by the next one. kube-proxy's
	// --ipvs-sync-period; default 30 s.
	FullSyncPeriod time.Duration
	// CanaryPeriod is how often a partial sync first checks that the
	// kernel still holds what the proxy last wrote (the number of virtual
	// servers and addresses) and, if not, turns full. Default 5 s.
	CanaryPeriod time.Duration
	// GracefulDeadline is how long a removed TCP real server may keep
	// connections at weight 0 before it is deleted anyway. Default 15 min.
	GracefulDeadline time.Duration
	Metrics          *proxy.Metrics
	Logger           *slog.Logger
	AfterSync        func(proxy.SyncResult)
	Now              func() time.Time
}

// Proxier keeps IPVS, kube-ipvs0, the ipsets and the iptables rules in
// line with the tracker's snapshots. The state is built whole at every
// sync (Build is pure and cheap next to the kernel), but a partial sync
// writes only what differs from the state it last wrote, without reading
// the kernel back: one changed Service is a handful of netlink messages
// whatever the number of Services. A full sync, the first, one every
// FullSyncPeriod, one after a failure and one when the canary finds the
// kernel changed, compares everything with the kernel instead. (kube-proxy's
// ipvs mode makes every sync full.)
type Proxier struct {
	cfg ProxierConfig

	mu          sync.Mutex
	pending     svcstate.Changes // not yet applied (a failed sync keeps them)
	applied     *svcstate.Snapshot
	lastSuccess time.Time
	// written is the state the kernel last matched; nil until a full sync
	// succeeds and after any failure, so that the next sync is full.
	written    *State
	lastFull   time.Time
	lastCanary time.Time
	full       bool // the last sync was full
	// draining are removed TCP real servers at weight 0, and since when.
	draining map[drainKey]time.Time
}

type drainKey struct {
	svc kipvs.Key
	dst netip.AddrPort
}

// NewProxier checks cfg and returns a Proxier.
func NewProxier(cfg ProxierConfig) (*Proxier, error) {
	if cfg.Tracker == nil || cfg.IPVS == nil || cfg.Links == nil || cfg.Sets == nil || cfg.IPTables == nil {
		return nil, errors.New("ipvs: proxier needs a tracker, IPVS, links, ipsets and iptables")
	}
	cfg.Rules = cfg.Rules.withDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.GracefulDeadline <= 0 {
		cfg.GracefulDeadline = 15 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.FullSyncPeriod <= 0 {
		cfg.FullSyncPeriod = 30 * time.Second
	}
	if cfg.CanaryPeriod <= 0 {
		cfg.CanaryPeriod = 5 * time.Second
	}
	cfg.Logger = cfg.Logger.With("proxyMode", "ipvs", "ipFamily", string(cfg.Rules.Family))
	return &Proxier{cfg: cfg, draining: map[drainKey]time.Time{}}, nil
}

// LastSuccess is when the kernel last matched a snapshot.
func (p *Proxier) LastSuccess() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastSuccess
}

// Applied is the snapshot the kernel last matched.
func (p *Proxier) Applied() *svcstate.Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied
}

// Sync brings the kernel in line with the tracker's current snapshot.
func (p *Proxier) Sync(ctx context.Context) error {
	start := p.cfg.Now()
	p.mu.Lock()
	res, st, err := p.sync(ctx)
	full := p.full
	done := p.cfg.Now()
	var changes svcstate.Changes
	if err == nil {
		p.lastSuccess = done
		changes, p.pending = p.pending, svcstate.Changes{}
	}
	p.mu.Unlock()
	if err != nil {
		if p.cfg.Metrics != nil {
			p.cfg.Metrics.RestoreFailures.Inc()
		}
		return err
	}
	p.observe(st, changes, full, start, done)
	p.logSync(st, changes, full, done.Sub(start))
	if p.cfg.AfterSync != nil {
		p.cfg.AfterSync(res)
	}
	return nil
}

// maxLoggedChanges keeps a sync's log line short when thousands of
// services change at once.
const maxLoggedChanges = 10

func (p *Proxier) logSync(st *State, ch svcstate.Changes, full bool, took time.Duration) {
	ports := slices.SortedFunc(maps.Keys(ch.Ports), svcstate.ServicePortName.Compare)
	more := 0
	if len(ports) > maxLoggedChanges {
		more, ports = len(ports)-maxLoggedChanges, ports[:maxLoggedChanges]
	}
	names, reach := make([]string, len(ports)), make([]string, len(ports))
	for i, n := range ports {
		names[i] = n.String() + "/" + strings.ToLower(string(n.Protocol))
		reach[i] = "removed"
		if r, ok := st.Stats.Reachable[n]; ok {
			reach[i] = strconv.Itoa(r)
		}
	}
	p.cfg.Logger.Info("synced ipvs rules", "full", full, "took", took, "changed", names, "endpoints", reach, "moreChanged", more,
		"servicePorts", st.Stats.ServicePorts, "virtualServers", len(st.Servers), "addresses", len(st.Addresses))
}

func (p *Proxier) observe(st *State, ch svcstate.Changes, full bool, start, done time.Time) {
	m := p.cfg.Metrics
	if m == nil {
		return
	}
	m.SyncDuration.Observe(done.Sub(start).Seconds())
	if full {
		m.SyncFullDuration.Observe(done.Sub(start).Seconds())
	} else {
		m.SyncPartialDuration.Observe(done.Sub(start).Seconds())
	}
	for _, t := range ch.TriggerTimes {
		if !t.IsZero() {
			m.NetworkProgramming.Observe(done.Sub(t).Seconds())
		}
	}
	m.LastSync.Set(float64(done.UnixNano()) / 1e9)
	m.Rules.WithLabelValues("filter").Set(float64(st.Stats.FilterRules))
	m.Rules.WithLabelValues("nat").Set(float64(st.Stats.NATRules))
	m.RulesLastSync.WithLabelValues("filter").Set(float64(st.Stats.FilterRules))
	m.RulesLastSync.WithLabelValues("nat").Set(float64(st.Stats.NATRules))
	m.ServiceChanges.Add(float64(len(ch.Ports)))
	m.EndpointChanges.Add(float64(len(ch.Services)))
	m.Services.Set(float64(st.Stats.ServicePorts))
	m.Endpoints.Set(float64(st.Stats.Endpoints))
}

func (p *Proxier) sync(ctx context.Context) (proxy.SyncResult, *State, error) {
	res, st, err := p.syncOnce(ctx)
	if err != nil {
		// What the kernel holds is unknown now: compare it all next time.
		p.written = nil
	}
	return res, st, err
}

func (p *Proxier) syncOnce(ctx context.Context) (proxy.SyncResult, *State, error) {
	cfg := p.cfg.Rules
	snap, ch := p.cfg.Tracker.Snapshot()
	p.pending.Merge(ch)
	other, err := p.cfg.Links.OtherAddresses(DummyLink, cfg.Family)
	if err != nil {
		return proxy.SyncResult{}, nil, err
	}
	cfg.LocalAddresses = other
	if cfg.AllNodePortAddresses {
		cfg.NodePortAddresses = nil
		for _, a := range other {
			if !a.IsLoopback() {
				cfg.NodePortAddresses = append(cfg.NodePortAddresses, a)
			}
		}
	}
	st := Build(cfg, snap)

	now := p.cfg.Now()
	created, err := p.cfg.Links.EnsureDummy(DummyLink)
	if err != nil {
		return proxy.SyncResult{}, nil, fmt.Errorf("ipvs: %s: %w", DummyLink, err)
	}
	p.full = p.written == nil || created || now.Sub(p.lastFull) >= p.cfg.FullSyncPeriod
	if !p.full && now.Sub(p.lastCanary) >= p.cfg.CanaryPeriod {
		intact, err := p.canary()
		if err != nil {
			return proxy.SyncResult{}, nil, err
		}
		p.lastCanary = now
		if !intact {
			p.cfg.Logger.Warn("IPVS or kube-ipvs0 was changed by someone else; comparing everything with the kernel")
			p.full = true
		}
	}
	// prev is what a partial sync compares with; a full sync compares
	// with nothing, and so rewrites every set and the rules, and checks
	// the jumps (one iptables process each, so not at every sync).
	prev := p.written
	if p.full {
		prev = nil
		if err := p.ensureJumps(ctx); err != nil {
			return proxy.SyncResult{}, nil, err
		}
	}
	if err := p.writeSets(ctx, st.Sets, prev); err != nil {
		return proxy.SyncResult{}, nil, err
	}
	var bound []netip.Addr
	if p.full {
		if bound, err = p.cfg.Links.Addresses(DummyLink, cfg.Family); err != nil {
			return proxy.SyncResult{}, nil, err
		}
	} else {
		bound = p.written.Addresses
	}
	isBound := make(map[netip.Addr]bool, len(bound))
	for _, a := range bound {
		isBound[a] = true
	}
	for _, a := range st.Addresses {
		if !isBound[a] {
			if err := p.cfg.Links.AddAddress(DummyLink, a); err != nil {
				return proxy.SyncResult{}, nil, err
			}
		}
	}
	if p.full {
		err = p.syncServers(st)
	} else {
		err = p.syncChangedServers(st)
	}
	if err != nil {
		return proxy.SyncResult{}, nil, err
	}
	if prev == nil || st.Rules != prev.Rules {
		if err := p.cfg.IPTables.Restore(ctx, []byte(st.Rules)); err != nil {
			return proxy.SyncResult{}, nil, err
		}
	}
	// Addresses leave only once the rules no longer name them (st's are
	// sorted).
	for _, a := range bound {
		if _, found := slices.BinarySearchFunc(st.Addresses, a, netip.Addr.Compare); !found {
			if err := p.cfg.Links.DeleteAddress(DummyLink, a); err != nil {
				return proxy.SyncResult{}, nil, err
			}
		}
	}
	if p.full {
		p.lastFull, p.lastCanary = now, now
	}
	p.written = st
	changed := maps.Clone(p.pending.Ports)
	if p.applied == nil {
		changed = map[svcstate.ServicePortName]struct{}{}
		for _, s := range snap.Sorted() {
			for _, n := range s.EndpointPorts() {
				changed[n] = struct{}{}
			}
		}
	}
	res := proxy.SyncResult{Previous: p.applied, Current: snap, Changed: changed}
	p.applied = snap
	return res, st, nil
}

// canary reports whether the kernel still holds as many of our virtual
// servers and addresses as the proxy last wrote: two netlink dumps, the
// cheap way to notice a flush (ipvsadm -C, a deleted link) between full
// syncs.
func (p *Proxier) canary() (bool, error) {
	have, err := p.cfg.IPVS.Services()
	if err != nil {
		return false, err
	}
	n := 0
	for _, s := range have {
		if _, ok := p.written.Servers[s.Key()]; ok {
			n++
		}
	}
	if n != len(p.written.Servers) {
		return false, nil
	}
	bound, err := p.cfg.Links.Addresses(DummyLink, p.cfg.Rules.Family)
	if err != nil {
		return false, err
	}
	return len(bound) == len(p.written.Addresses), nil
}

// ensureJumps makes the built-in chains jump to the mode's chains; the
// chains themselves are declared by the restore.
func (p *Proxier) ensureJumps(ctx context.Context) error {
	for _, c := range NATChains {
		if err := p.cfg.IPTables.EnsureChain(ctx, "nat", c); err != nil {
			return err
		}
	}
	for _, c := range FilterChains {
		if err := p.cfg.IPTables.EnsureChain(ctx, "filter", c); err != nil {
			return err
		}
	}
	for _, j := range JumpRules {
		if err := p.cfg.IPTables.EnsureRule(ctx, j.Table, j.Chain, "-m", "comment", "--comment", j.Comment, "-j", j.Target); err != nil {
			return err
		}
	}
	return nil
}

// writeSets writes the sets whose contents differ from prev's (every
// set when prev is nil): sets prev lacks created and filled whole, the
// others by adding and deleting only the entries that changed.
func (p *Proxier) writeSets(ctx context.Context, sets []ipset.Set, prev *State) error {
	last := map[string][]string{}
	if prev != nil {
		for _, s := range prev.Sets {
			last[s.Name] = s.Entries
		}
	}
	var whole []ipset.Set
	var deltas []ipset.Delta
	for _, s := range sets {
		was, ok := last[s.Name]
		switch {
		case !ok:
			whole = append(whole, s)
		case !slices.Equal(was, s.Entries):
			d := ipset.Delta{Name: s.Name, Comment: s.Comment}
			d.Add, d.Del = difference(s.Entries, was), difference(was, s.Entries)
			deltas = append(deltas, d)
		}
	}
	if err := p.cfg.Sets.Restore(ctx, whole); err != nil {
		return err
	}
	return p.cfg.Sets.Update(ctx, deltas)
}

// difference is the entries of a that b lacks.
func difference(a, b []string) []string {
	in := make(map[string]struct{}, len(b))
	for _, e := range b {
		in[e] = struct{}{}
	}
	var out []string
	for _, e := range a {
		if _, ok := in[e]; !ok {
			out = append(out, e)
		}
	}
	return out
}

// syncServers makes IPVS hold st's virtual servers, comparing with what
// the kernel holds: new ones added, changed ones updated, real servers
// added and removed (TCP ones with connections drained at weight 0
// first), and virtual servers that are no longer wanted deleted unless an
// excluded CIDR holds them.
func (p *Proxier) syncServers(st *State) error {
	have, err := p.cfg.IPVS.Services()
	if err != nil {
		return err
	}
	haveBy := map[kipvs.Key]kipvs.Service{}
	for _, s := range have {
		haveBy[s.Key()] = s
	}
	var errs []error
	for _, k := range slices.SortedFunc(maps.Keys(st.Servers), compareKeys) {
		v := st.Servers[k]
		cur, ok := haveBy[k]
		switch {
		case !ok:
			if err := p.cfg.IPVS.AddService(v.Service); err != nil {
				errs = append(errs, err)
				continue
			}
		case cur != v.Service:
			if err := p.cfg.IPVS.UpdateService(v.Service); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		errs = append(errs, p.syncDestinations(v, ok))
	}
	family := p.cfg.Rules.Family
	for _, s := range have {
		if _, ok := st.Servers[s.Key()]; ok || (s.Addr.Is6() != (family == v1.IPv6Protocol)) || p.excluded(s.Addr) {
			continue
		}
		errs = append(errs, p.deleteServer(s))
	}
	return errors.Join(errs...)
}

// syncChangedServers brings IPVS from the state last written to st,
// touching only the virtual servers that differ between the two and
// those with real servers still draining.
func (p *Proxier) syncChangedServers(st *State) error {
	drainingSvc := map[kipvs.Key]bool{}
	for k := range p.draining {
		drainingSvc[k.svc] = true
	}
	var errs []error
	for _, k := range slices.SortedFunc(maps.Keys(st.Servers), compareKeys) {
		v, w := st.Servers[k], p.written.Servers[k]
		switch {
		case w == nil:
			if err := p.cfg.IPVS.AddService(v.Service); err != nil {
				errs = append(errs, err)
				continue
			}
			errs = append(errs, p.syncDestinations(v, false))
			continue
		case w.Service != v.Service:
			if err := p.cfg.IPVS.UpdateService(v.Service); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if drainingSvc[k] || !slices.Equal(w.Destinations, v.Destinations) {
			errs = append(errs, p.syncDestinations(v, true))
		}
	}
	for k, w := range p.written.Servers {
		if _, ok := st.Servers[k]; !ok {
			errs = append(errs, p.deleteServer(w.Service))
		}
	}
	return errors.Join(errs...)
}

func (p *Proxier) deleteServer(s kipvs.Service) error {
	for k := range p.draining {
		if k.svc == s.Key() {
			delete(p.draining, k)
		}
	}
	return p.cfg.IPVS.DeleteService(s)
}

func (p *Proxier) excluded(a netip.Addr) bool {
	return slices.ContainsFunc(p.cfg.ExcludeCIDRs, func(c netip.Prefix) bool { return c.Contains(a) })
}

// syncDestinations makes v's real servers those of the state. A removed
// real server of a TCP service that still has connections is drained:
// weight 0 (no new connections) until they are gone or the deadline
// passes, as kube-proxy's graceful termination does; UDP and SCTP ones
// go at once (expire_nodest_conn drops their flows).
func (p *Proxier) syncDestinations(v *VirtualServer, existed bool) error {
	var have []kipvs.Destination
	if existed {
		var err error
		if have, err = p.cfg.IPVS.Destinations(v.Service); err != nil {
			return err
		}
	}
	var errs []error
	want := map[netip.AddrPort]bool{}
	for _, d := range v.Destinations {
		want[d] = true
	}
	haveBy := map[netip.AddrPort]kipvs.Destination{}
	for _, d := range have {
		haveBy[d.AddrPort()] = d
	}
	for _, d := range v.Destinations {
		cur, ok := haveBy[d]
		switch {
		case !ok:
			errs = append(errs, p.cfg.IPVS.AddDestination(v.Service, kipvs.Destination{Addr: d.Addr(), Port: d.Port(), Weight: 1}))
		case cur.Weight != 1:
			// Back from draining, or left at 0 by an earlier run.
			errs = append(errs, p.cfg.IPVS.UpdateDestination(v.Service, kipvs.Destination{Addr: d.Addr(), Port: d.Port(), Weight: 1}))
		}
		delete(p.draining, drainKey{v.Key(), d})
	}
	now := p.cfg.Now()
	for _, d := range have {
		if want[d.AddrPort()] {
			continue
		}
		k := drainKey{v.Key(), d.AddrPort()}
		since, draining := p.draining[k]
		switch {
		case v.Protocol != kipvs.TCP || d.ActiveConns+d.InactiveConns == 0 || (draining && now.Sub(since) >= p.cfg.GracefulDeadline):
			errs = append(errs, p.cfg.IPVS.DeleteDestination(v.Service, d))
			delete(p.draining, k)
		case !draining:
			d.Weight = 0
			errs = append(errs, p.cfg.IPVS.UpdateDestination(v.Service, d))
			p.draining[k] = now
		}
	}
	return errors.Join(errs...)
}

// Draining reports whether real servers are being drained: the runner
// should sync again soon to delete them once their connections end.
func (p *Proxier) Draining() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.draining) > 0
}
