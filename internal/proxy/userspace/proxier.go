// Package userspace is the proxy mode the reference documents describe
// first: a socket in user space per service port, iptables rules that
// REDIRECT the service's traffic (cluster IP, external and load-balancer
// IPs, node port) to it, and a proxy that picks endpoints round-robin,
// honours ClientIP affinity, and tries another endpoint when one cannot
// be reached — which the kernel modes cannot do.
//
// What it costs: every byte crosses user space, and endpoints see the
// node as the client (the client's address is never preserved, whatever
// the traffic policy).
package userspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// Config assembles a userspace proxier.
type Config struct {
	Tracker  *svcstate.Tracker
	Executor iptables.Executor // the REDIRECT rules
	Sockets  Sockets           // default Real{}
	Node     proxy.Node
	// Family is the IP family served. Default IPv4.
	Family v1.IPFamily
	// NodePortAddresses limits node ports to these addresses.
	NodePortAddresses []netip.Addr
	// UDPIdleTimeout closes a UDP session after this long without
	// traffic. Default 250ms, kube-proxy's --udp-timeout.
	UDPIdleTimeout time.Duration
	Metrics        *proxy.Metrics // optional
	Logger         *slog.Logger   // optional
	// AfterSync, if set, is called after every sync that changed
	// something, outside the proxier's lock.
	AfterSync func(proxy.SyncResult)
	Now       func() time.Time
}

// Proxier runs the proxy sockets and keeps the rules pointing at them.
// Its Sync is the proxy.SyncFunc of a proxy.Runner.
type Proxier struct {
	cfg Config

	mu          sync.Mutex
	ports       map[svcstate.ServicePortName]*servicePort
	pending     svcstate.Changes
	applied     *svcstate.Snapshot
	lastSuccess time.Time
	lastRules   []byte // last restore applied; nil forces the next
}

// servicePort is the sockets of one service port. External traffic
// (node port, external and load-balancer IPs) shares the internal socket
// unless the traffic policies give it other endpoints.
type servicePort struct {
	sp       *svcstate.ServicePort
	internal socket
	external socket // nil: shares internal
}

type socket interface {
	port() int
	close() error
	balancer() *balancer
	// update sets the endpoints new connections and sessions go to.
	update(endpoints []string, affinity time.Duration)
}

func (s *tcpSocket) balancer() *balancer { return s.bal }
func (s *udpSocket) balancer() *balancer { return s.bal }

// update keeps established TCP connections: like the kernel modes, a
// removed endpoint's connections end when it does.
func (s *tcpSocket) update(endpoints []string, affinity time.Duration) {
	s.bal.update(endpoints, affinity)
}

// update also ends the sessions of endpoints that left: a UDP client
// that keeps talking would otherwise keep its session, and its endpoint,
// forever — what conntrack cleanup prevents in the kernel modes.
func (s *udpSocket) update(endpoints []string, affinity time.Duration) {
	s.bal.update(endpoints, affinity)
	s.dropStale(endpoints)
}

// NewProxier checks cfg and returns a Proxier.
func NewProxier(cfg Config) (*Proxier, error) {
	if cfg.Tracker == nil || cfg.Executor == nil {
		return nil, errors.New("userspace: proxier needs a tracker and an executor")
	}
	if cfg.Family == "" {
		cfg.Family = v1.IPv4Protocol
	}
	if cfg.Sockets == nil {
		cfg.Sockets = Real{}
	}
	if cfg.UDPIdleTimeout <= 0 {
		cfg.UDPIdleTimeout = 250 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Logger = cfg.Logger.With("proxyMode", "userspace", "ipFamily", string(cfg.Family))
	return &Proxier{cfg: cfg, ports: map[svcstate.ServicePortName]*servicePort{}}, nil
}

// LastSuccess is when the sockets and rules last matched a snapshot.
func (p *Proxier) LastSuccess() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastSuccess
}

// Applied returns the snapshot the sockets were last set up from.
func (p *Proxier) Applied() *svcstate.Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied
}

// ProxyPorts returns the proxy socket ports, internal then external, by
// service port: what the rules redirect to.
func (p *Proxier) ProxyPorts() map[svcstate.ServicePortName][2]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[svcstate.ServicePortName][2]int{}
	for n, s := range p.ports {
		v := [2]int{s.internal.port(), 0}
		if s.external != nil {
			v[1] = s.external.port()
		}
		out[n] = v
	}
	return out
}

// Close closes every proxy socket. Connections already relayed go on
// until they end.
func (p *Proxier) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for n, s := range p.ports {
		s.closeAll()
		delete(p.ports, n)
	}
}

func (s *servicePort) closeAll() {
	_ = s.internal.close()
	if s.external != nil {
		_ = s.external.close()
	}
}

// Sync sets up, updates and closes proxy sockets for the service ports
// that changed, and rewrites the rules when the sockets or addresses
// they redirect changed. A sync with nothing to do rewrites the rules
// anyway: it is the periodic repair, and the rules are few.
func (p *Proxier) Sync(ctx context.Context) error {
	res, err := p.sync(ctx)
	if err == nil && p.cfg.AfterSync != nil && len(res.Changed) > 0 {
		p.cfg.AfterSync(res)
	}
	return err
}

func (p *Proxier) sync(ctx context.Context) (proxy.SyncResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	start := p.cfg.Now()
	snap, changes := p.cfg.Tracker.Snapshot()
	p.pending.Merge(changes)
	periodic := len(p.pending.Ports) == 0

	var failed []error
	names := slices.SortedFunc(maps.Keys(p.pending.Ports), svcstate.ServicePortName.Compare)
	for _, n := range names {
		if err := p.syncPort(snap, n); err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		p.countFailure()
		return proxy.SyncResult{}, errors.Join(failed...)
	}

	portals := p.portals()
	data, rules := BuildRules(portals, p.cfg.NodePortAddresses)
	if periodic || !slices.Equal(data, p.lastRules) {
		if err := p.applyRules(ctx, data); err != nil {
			p.lastRules = nil
			p.countFailure()
			return proxy.SyncResult{}, err
		}
		p.lastRules = data
	}

	done := p.cfg.Now()
	res := proxy.SyncResult{Previous: p.applied, Current: snap, Changed: p.pending.Ports}
	p.applied, p.lastSuccess = snap, done
	if !periodic {
		p.logSync(names, done.Sub(start))
	}
	p.observe(start, done, rules)
	p.pending = svcstate.Changes{}
	return res, nil
}

func (p *Proxier) countFailure() {
	if m := p.cfg.Metrics; m != nil {
		m.RestoreFailures.Inc()
	}
}

// applyRules ensures the jumps and chains, then rewrites the chains.
func (p *Proxier) applyRules(ctx context.Context, data []byte) error {
	ex := p.cfg.Executor
	for _, j := range JumpRules() {
		if err := ex.EnsureChain(ctx, j.Table, j.Target); err != nil {
			return fmt.Errorf("ensure chain %s/%s: %w", j.Table, j.Target, err)
		}
		if err := ex.EnsureRule(ctx, j.Table, j.Chain, j.Args()...); err != nil {
			return fmt.Errorf("ensure jump %s/%s -> %s: %w", j.Table, j.Chain, j.Target, err)
		}
	}
	if err := ex.Restore(ctx, data); err != nil {
		return fmt.Errorf("iptables-restore of %d bytes: %w", len(data), err)
	}
	return nil
}

// syncPort brings one service port's sockets in line with the snapshot.
func (p *Proxier) syncPort(snap *svcstate.Snapshot, n svcstate.ServicePortName) error {
	sp, eps := snap.Port(n)
	cur := p.ports[n]
	if sp != nil {
		sp = sp.ForFamily(p.cfg.Family)
	}
	if sp == nil || !sp.ClusterIP(p.cfg.Family).IsValid() || (sp.Protocol != v1.ProtocolTCP && sp.Protocol != v1.ProtocolUDP) {
		if sp != nil && sp.Protocol == v1.ProtocolSCTP {
			p.cfg.Logger.Warn("SCTP is not proxied in userspace mode", "servicePort", n.String())
		}
		if cur != nil {
			cur.closeAll()
			delete(p.ports, n)
		}
		return nil
	}
	var mine []svcstate.Endpoint
	for _, e := range eps {
		if svcstate.Family(e.IP) == p.cfg.Family {
			mine = append(mine, e)
		}
	}
	sel := proxy.Select(sp, mine, p.cfg.Node)
	internal := sel.Cluster
	if sp.InternalPolicyLocal {
		internal = sel.Local
	}
	external := internal
	splitExternal := sp.ExternallyAccessible() && sp.ExternalPolicyLocal != sp.InternalPolicyLocal
	if splitExternal {
		external = sel.Cluster
		if sp.ExternalPolicyLocal {
			external = sel.Local
		}
	}
	affinity := time.Duration(0)
	if sp.SessionAffinityClientIP {
		affinity = time.Duration(sp.StickyMaxAgeSeconds) * time.Second
	}

	if cur != nil && cur.sp.Protocol != sp.Protocol {
		cur.closeAll()
		cur = nil
	}
	if cur == nil {
		s, err := p.open(sp)
		if err != nil {
			return fmt.Errorf("proxy socket for %s: %w", n, err)
		}
		cur = &servicePort{internal: s}
		p.ports[n] = cur
	}
	cur.sp = sp
	switch {
	case splitExternal && cur.external == nil:
		s, err := p.open(sp)
		if err != nil {
			return fmt.Errorf("external proxy socket for %s: %w", n, err)
		}
		cur.external = s
	case !splitExternal && cur.external != nil:
		_ = cur.external.close()
		cur.external = nil
	}
	cur.internal.update(endpointStrings(internal), affinity)
	if cur.external != nil {
		cur.external.update(endpointStrings(external), affinity)
	}
	return nil
}

func endpointStrings(eps []svcstate.Endpoint) []string {
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = e.String()
	}
	return out
}

func (p *Proxier) open(sp *svcstate.ServicePort) (socket, error) {
	bal := newBalancer(p.cfg.Now)
	logger := p.cfg.Logger.With("servicePort", sp.Name.String())
	var onFail func()
	if m := p.cfg.Metrics; m != nil {
		onFail = m.EndpointDialFailures.Inc
	}
	switch sp.Protocol {
	case v1.ProtocolTCP:
		l, err := p.cfg.Sockets.ListenTCP(0)
		if err != nil {
			return nil, err
		}
		s := &tcpSocket{l: l, bal: bal, dial: p.cfg.Sockets.DialContext, logger: logger, onFail: onFail}
		go s.serve()
		return s, nil
	default:
		pc, err := p.cfg.Sockets.ListenUDP(0)
		if err != nil {
			return nil, err
		}
		s := &udpSocket{pc: pc, bal: bal, dial: p.cfg.Sockets.DialContext, timeout: p.cfg.UDPIdleTimeout, logger: logger, onFail: onFail}
		go s.serve()
		return s, nil
	}
}

// portals lists what the rules must redirect, in a stable order.
func (p *Proxier) portals() []Portal {
	names := slices.SortedFunc(maps.Keys(p.ports), svcstate.ServicePortName.Compare)
	out := make([]Portal, 0, len(names))
	for _, n := range names {
		s := p.ports[n]
		sp := s.sp
		proto := strings.ToLower(string(sp.Protocol))
		ext := s.internal
		if s.external != nil {
			ext = s.external
		}
		out = append(out, Portal{Name: n, Protocol: proto, Addrs: []netip.Addr{sp.ClusterIP(p.cfg.Family)}, Port: sp.Port,
			ProxyPort: s.internal.port()})
		external := slices.Concat(sp.ExternalIPs, sp.LoadBalancerIPs)
		if len(external) > 0 || sp.NodePort != 0 {
			out = append(out, Portal{Name: n, Protocol: proto, Addrs: external, Port: sp.Port, NodePort: sp.NodePort,
				ProxyPort: ext.port()})
		}
	}
	return out
}

const maxLoggedChanges = 10

func (p *Proxier) logSync(names []svcstate.ServicePortName, took time.Duration) {
	var changed []string
	for _, n := range names {
		desc := n.String() + "/" + strings.ToLower(string(n.Protocol))
		if s := p.ports[n]; s != nil {
			desc += fmt.Sprintf("=%d endpoints", s.internal.balancer().count())
		} else {
			desc += "=removed"
		}
		changed = append(changed, desc)
	}
	more := 0
	if len(changed) > maxLoggedChanges {
		more, changed = len(changed)-maxLoggedChanges, changed[:maxLoggedChanges]
	}
	p.cfg.Logger.Info("synced userspace proxy", "took", took, "changed", changed, "moreChanged", more, "servicePorts", len(p.ports))
}

func (p *Proxier) observe(start, done time.Time, rules int) {
	m := p.cfg.Metrics
	if m == nil {
		return
	}
	took := done.Sub(start).Seconds()
	m.SyncDuration.Observe(took)
	for _, t := range p.pending.TriggerTimes {
		if !t.IsZero() {
			m.NetworkProgramming.Observe(done.Sub(t).Seconds())
		}
	}
	m.LastSync.Set(float64(done.UnixNano()) / 1e9)
	m.Rules.WithLabelValues("nat").Set(float64(rules))
	m.RulesLastSync.WithLabelValues("nat").Set(float64(rules))
	m.ServiceChanges.Add(float64(len(p.pending.Ports)))
	m.EndpointChanges.Add(float64(len(p.pending.Services)))
	endpoints := 0
	for _, s := range p.ports {
		endpoints += s.internal.balancer().count()
	}
	m.Services.Set(float64(len(p.ports)))
	m.Endpoints.Set(float64(endpoints))
}
