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
	// EnsureDummy creates the dummy link (down) if it is missing.
	EnsureDummy(name string) error
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
	Restore(ctx context.Context, sets []ipset.Set) error
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
	// RewritePeriod is how often a sync rewrites everything (jumps, every
	// set, the rules) even when nothing changed, which repairs state
	// changed behind the proxy's back. Default 30 s.
	RewritePeriod time.Duration
	// GracefulDeadline is how long a removed TCP real server may keep
	// connections at weight 0 before it is deleted anyway. Default 15 min.
	GracefulDeadline time.Duration
	Metrics          *proxy.Metrics
	Logger           *slog.Logger
	AfterSync        func(proxy.SyncResult)
	Now              func() time.Time
}

// Proxier keeps IPVS, kube-ipvs0, the ipsets and the iptables rules in
// line with the tracker's snapshots. Every sync is full, as kube-proxy's
// ipvs mode: the state is built whole, but only what differs from the
// kernel is written.
type Proxier struct {
	cfg ProxierConfig

	mu          sync.Mutex
	pending     svcstate.Changes // not yet applied (a failed sync keeps them)
	applied     *svcstate.Snapshot
	lastSuccess time.Time
	lastSets    map[string][]string // set contents last written
	lastRules   string
	lastRewrite time.Time
	full        bool // the last sync rewrote everything
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
	if cfg.RewritePeriod <= 0 {
		cfg.RewritePeriod = 30 * time.Second
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
	p.observe(st, changes, start, done)
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

func (p *Proxier) observe(st *State, ch svcstate.Changes, start, done time.Time) {
	m := p.cfg.Metrics
	if m == nil {
		return
	}
	m.SyncDuration.Observe(done.Sub(start).Seconds())
	m.SyncFullDuration.Observe(done.Sub(start).Seconds())
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

	p.full = false
	if now := p.cfg.Now(); now.Sub(p.lastRewrite) >= p.cfg.RewritePeriod {
		p.full = true
		// Everything once in a while: the jumps (one iptables process
		// each, so not at every sync), and every set and rule.
		p.lastRules, p.lastSets = "", nil
		if err := p.ensureJumps(ctx); err != nil {
			return proxy.SyncResult{}, nil, err
		}
		p.lastRewrite = now
	}
	if err := p.cfg.Links.EnsureDummy(DummyLink); err != nil {
		return proxy.SyncResult{}, nil, fmt.Errorf("ipvs: %s: %w", DummyLink, err)
	}
	if err := p.writeSets(ctx, st.Sets); err != nil {
		return proxy.SyncResult{}, nil, err
	}
	bound, err := p.cfg.Links.Addresses(DummyLink, cfg.Family)
	if err != nil {
		return proxy.SyncResult{}, nil, err
	}
	for _, a := range st.Addresses {
		if !slices.Contains(bound, a) {
			if err := p.cfg.Links.AddAddress(DummyLink, a); err != nil {
				return proxy.SyncResult{}, nil, err
			}
		}
	}
	if err := p.syncServers(st); err != nil {
		return proxy.SyncResult{}, nil, err
	}
	if st.Rules != p.lastRules {
		if err := p.cfg.IPTables.Restore(ctx, []byte(st.Rules)); err != nil {
			p.lastRewrite = time.Time{} // a jump may be missing: check them all next time
			return proxy.SyncResult{}, nil, err
		}
		p.lastRules = st.Rules
	}
	// Addresses leave only once the rules no longer name them.
	for _, a := range bound {
		if !slices.Contains(st.Addresses, a) {
			if err := p.cfg.Links.DeleteAddress(DummyLink, a); err != nil {
				return proxy.SyncResult{}, nil, err
			}
		}
	}
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

// writeSets restores the sets whose contents changed since the last write
// (all of them the first time).
func (p *Proxier) writeSets(ctx context.Context, sets []ipset.Set) error {
	var changed []ipset.Set
	for _, s := range sets {
		if last, ok := p.lastSets[s.Name]; ok && slices.Equal(last, s.Entries) {
			continue
		}
		changed = append(changed, s)
	}
	if err := p.cfg.Sets.Restore(ctx, changed); err != nil {
		p.lastSets = nil // unknown now: write all next time
		return err
	}
	if p.lastSets == nil {
		p.lastSets = map[string][]string{}
	}
	for _, s := range changed {
		p.lastSets[s.Name] = s.Entries
	}
	return nil
}

// syncServers makes IPVS hold st's virtual servers: new ones added,
// changed ones updated, real servers added and removed (TCP ones with
// connections drained at weight 0 first), and virtual servers that are
// no longer wanted deleted unless an excluded CIDR holds them.
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
		if err := p.cfg.IPVS.DeleteService(s); err != nil {
			errs = append(errs, err)
		}
		for k := range p.draining {
			if k.svc == s.Key() {
				delete(p.draining, k)
			}
		}
	}
	return errors.Join(errs...)
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
