package ipvs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
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
	Rules Config
	// Sync is the sync's. A full sync compares everything with the
	// kernel and rewrites what differs (jumps, every set, the rules,
	// every virtual server): kube-proxy's --ipvs-sync-period, default
	// 30 s here. The canary is the number of virtual servers and
	// addresses, checked every 5 s by default.
	Sync     proxy.SyncerConfig
	IPVS     IPVS
	Links    Links
	Sets     Sets
	IPTables utiliptables.Executor
	// ExcludeCIDRs (--ipvs-exclude-cidrs): virtual servers in them that
	// are not ours are left alone.
	ExcludeCIDRs []netip.Prefix
	// GracefulDeadline is how long a removed TCP real server may keep
	// connections at weight 0 before it is deleted anyway. Default 15 min.
	GracefulDeadline time.Duration
}

// Proxier keeps IPVS, kube-ipvs0, the ipsets and the iptables rules in
// line with the tracker's snapshots: a proxy.Syncer whose mode writes
// them. The state is built whole at every sync (Build is pure and cheap
// next to the kernel), but a partial sync writes only what differs from
// the state it last wrote, without reading the kernel back: one changed
// Service is a handful of netlink messages whatever the number of
// Services. A full sync, the first, one every FullSyncPeriod, one after a
// failure and one when the canary finds the kernel changed, compares
// everything with the kernel instead. (kube-proxy's ipvs mode makes every
// sync full.)
type Proxier struct {
	*proxy.Syncer
}

// writer is the ipvs mode of a Syncer.
type writer struct {
	cfg ProxierConfig
	// written is the state the kernel last matched; nil until a full sync
	// succeeds and after any failure, so that the next sync is full.
	written *State
	// draining are removed TCP real servers at weight 0, and since when.
	draining map[drainKey]time.Time
}

type drainKey struct {
	svc kipvs.Key
	dst netip.AddrPort
}

// NewProxier checks cfg and returns a Proxier.
func NewProxier(cfg ProxierConfig) (*Proxier, error) {
	if cfg.Sync.Tracker == nil || cfg.IPVS == nil || cfg.Links == nil || cfg.Sets == nil || cfg.IPTables == nil {
		return nil, errors.New("ipvs: proxier needs a tracker, IPVS, links, ipsets and iptables")
	}
	if err := cfg.Rules.NodeConfig.Validate("ipvs"); err != nil {
		return nil, err
	}
	cfg.Rules = cfg.Rules.withDefaults()
	if cfg.GracefulDeadline <= 0 {
		cfg.GracefulDeadline = 15 * time.Minute
	}
	if cfg.Sync.Now == nil {
		cfg.Sync.Now = time.Now
	}
	if cfg.Sync.FullSyncPeriod <= 0 {
		cfg.Sync.FullSyncPeriod = 30 * time.Second
	}
	if cfg.Sync.CanaryPeriod <= 0 {
		cfg.Sync.CanaryPeriod = 5 * time.Second
	}
	cfg.Sync.Mode, cfg.Sync.Family = "ipvs", cfg.Rules.Family
	w := &writer{cfg: cfg, draining: map[drainKey]time.Time{}}
	s := proxy.NewSyncer(cfg.Sync, w)
	return &Proxier{Syncer: s}, nil
}

// Apply writes what differs from the state last written, or compares
// everything with the kernel when w is full (or kube-ipvs0 had to be
// created again).
func (p *writer) Apply(ctx context.Context, w proxy.Write) (proxy.Written, error) {
	st, full, err := p.apply(ctx, w)
	if err != nil {
		// What the kernel holds is unknown now: compare it all next time.
		p.written = nil
		return proxy.Written{}, err
	}
	return proxy.Written{
		Full:  full,
		Again: len(p.draining) > 0,
		Stats: proxy.SyncStats{
			ServicePorts: st.Stats.ServicePorts, Endpoints: st.Stats.Endpoints,
			Rules:        map[string]int{"filter": st.Stats.FilterRules, "nat": st.Stats.NATRules},
			RulesWritten: map[string]int{"filter": st.Stats.FilterRules, "nat": st.Stats.NATRules},
		},
		Reachable: func(n svcstate.ServicePortName) (int, bool) {
			r, ok := st.Stats.Reachable[n]
			return r, ok
		},
		Log: []any{"virtualServers", len(st.Servers), "addresses", len(st.Addresses)},
	}, nil
}

func (p *writer) apply(ctx context.Context, w proxy.Write) (*State, bool, error) {
	cfg := p.cfg.Rules
	other, err := p.cfg.Links.OtherAddresses(DummyLink, cfg.Family)
	if err != nil {
		return nil, false, err
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
	st := Build(cfg, w.Snapshot)

	created, err := p.cfg.Links.EnsureDummy(DummyLink)
	if err != nil {
		return nil, false, fmt.Errorf("ipvs: %s: %w", DummyLink, err)
	}
	full := w.Full || p.written == nil || created
	// prev is what a partial sync compares with; a full sync compares
	// with nothing, and so rewrites every set and the rules, and checks
	// the jumps (one iptables process each, so not at every sync).
	prev := p.written
	if full {
		prev = nil
		if err := p.ensureJumps(ctx); err != nil {
			return nil, false, err
		}
	}
	if err := p.writeSets(ctx, st.Sets, prev); err != nil {
		return nil, false, err
	}
	var bound []netip.Addr
	if full {
		if bound, err = p.cfg.Links.Addresses(DummyLink, cfg.Family); err != nil {
			return nil, false, err
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
				return nil, false, err
			}
		}
	}
	if full {
		err = p.syncServers(st)
	} else {
		err = p.syncChangedServers(st)
	}
	if err != nil {
		return nil, false, err
	}
	if prev == nil || st.Rules != prev.Rules {
		if err := p.cfg.IPTables.Restore(ctx, []byte(st.Rules)); err != nil {
			return nil, false, proxy.RestoreFailed(err)
		}
	}
	// Addresses leave only once the rules no longer name them (st's are
	// sorted).
	for _, a := range bound {
		if _, found := slices.BinarySearchFunc(st.Addresses, a, netip.Addr.Compare); !found {
			if err := p.cfg.Links.DeleteAddress(DummyLink, a); err != nil {
				return nil, false, err
			}
		}
	}
	p.written = st
	return st, full, nil
}

// Intact reports whether the kernel still holds as many of our virtual
// servers and addresses as the proxy last wrote: two netlink dumps, the
// cheap way to notice a flush (ipvsadm -C, a deleted link) between full
// syncs.
func (p *writer) Intact(context.Context) (bool, error) {
	if p.written == nil {
		return false, nil
	}
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
func (p *writer) ensureJumps(ctx context.Context) error {
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
func (p *writer) writeSets(ctx context.Context, sets []ipset.Set, prev *State) error {
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
func (p *writer) syncServers(st *State) error {
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
func (p *writer) syncChangedServers(st *State) error {
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

func (p *writer) deleteServer(s kipvs.Service) error {
	for k := range p.draining {
		if k.svc == s.Key() {
			delete(p.draining, k)
		}
	}
	return p.cfg.IPVS.DeleteService(s)
}

func (p *writer) excluded(a netip.Addr) bool {
	return slices.ContainsFunc(p.cfg.ExcludeCIDRs, func(c netip.Prefix) bool { return c.Contains(a) })
}

// syncDestinations makes v's real servers those of the state. A removed
// real server of a TCP service that still has connections is drained:
// weight 0 (no new connections) until they are gone or the deadline
// passes, as kube-proxy's graceful termination does; UDP and SCTP ones
// go at once (expire_nodest_conn drops their flows).
func (p *writer) syncDestinations(v *VirtualServer, existed bool) error {
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
	now := p.cfg.Sync.Now()
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
