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
	// Rules is the node: the family served, which endpoints are local,
	// the node port addresses.
	Rules proxy.NodeConfig
	// Sync is the sync's: a full sync sets up every service port's
	// sockets and rewrites the rules, and the canary is the rules'
	// chains.
	Sync     proxy.SyncerConfig
	Executor iptables.Executor // the REDIRECT rules
	Sockets  Sockets           // default Real{}
	// UDPIdleTimeout closes a UDP session after this long without
	// traffic. Default 250ms, kube-proxy's --udp-timeout.
	UDPIdleTimeout time.Duration
}

// Proxier runs the proxy sockets and keeps the rules pointing at them: a
// proxy.Syncer whose mode opens, updates and closes sockets. Its Sync is
// the proxy.SyncFunc of a proxy.Runner.
type Proxier struct {
	*proxy.Syncer
	w *writer
}

// writer is the userspace mode of a Syncer.
type writer struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex // ports, which ProxyPorts and Close read outside syncs
	ports     map[svcstate.ServicePortName]*servicePort
	lastRules []byte // last restore applied; nil forces the next
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
	if cfg.Sync.Tracker == nil || cfg.Executor == nil {
		return nil, errors.New("userspace: proxier needs a tracker and an executor")
	}
	cfg.Rules = cfg.Rules.WithDefaults()
	if cfg.Sockets == nil {
		cfg.Sockets = Real{}
	}
	if cfg.UDPIdleTimeout <= 0 {
		cfg.UDPIdleTimeout = 250 * time.Millisecond
	}
	if cfg.Sync.Now == nil {
		cfg.Sync.Now = time.Now
	}
	cfg.Sync.Mode, cfg.Sync.Family = "userspace", cfg.Rules.Family
	w := &writer{cfg: cfg, ports: map[svcstate.ServicePortName]*servicePort{}}
	s := proxy.NewSyncer(cfg.Sync, w)
	w.log = s.Logger()
	return &Proxier{Syncer: s, w: w}, nil
}

// ProxyPorts returns the proxy socket ports, internal then external, by
// service port: what the rules redirect to.
func (p *Proxier) ProxyPorts() map[svcstate.ServicePortName][2]int {
	w := p.w
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[svcstate.ServicePortName][2]int{}
	for n, s := range w.ports {
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
	w := p.w
	w.mu.Lock()
	defer w.mu.Unlock()
	for n, s := range w.ports {
		s.closeAll()
		delete(w.ports, n)
	}
}

func (s *servicePort) closeAll() {
	_ = s.internal.close()
	if s.external != nil {
		_ = s.external.close()
	}
}

// Apply sets up, updates and closes the proxy sockets of the service
// ports that changed (of every one when w is full), and rewrites the
// rules when the sockets or addresses they redirect changed, or when w is
// full.
func (p *writer) Apply(ctx context.Context, w proxy.Write) (proxy.Written, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := w.Changed
	if w.Full {
		names = maps.Clone(w.Changed)
		for n := range p.ports {
			names[n] = struct{}{}
		}
		for svc := range w.Snapshot.All {
			for _, n := range svc.EndpointPorts() {
				names[n] = struct{}{}
			}
		}
	}
	var failed []error
	for _, n := range slices.SortedFunc(maps.Keys(names), svcstate.ServicePortName.Compare) {
		if err := p.syncPort(w.Snapshot, n); err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		return proxy.Written{}, errors.Join(failed...)
	}

	data, rules := BuildRules(p.portals(), p.cfg.Rules.NodePortAddresses)
	if w.Full || !slices.Equal(data, p.lastRules) {
		if err := p.applyRules(ctx, data); err != nil {
			p.lastRules = nil
			return proxy.Written{}, err
		}
		p.lastRules = data
	}
	endpoints := 0
	for _, s := range p.ports {
		endpoints += s.internal.balancer().count()
	}
	return proxy.Written{
		Full: w.Full,
		Stats: proxy.SyncStats{
			ServicePorts: len(p.ports), Endpoints: endpoints,
			Rules: map[string]int{"nat": rules}, RulesWritten: map[string]int{"nat": rules},
		},
		Reachable: func(n svcstate.ServicePortName) (int, bool) {
			if s := p.ports[n]; s != nil {
				return s.internal.balancer().count(), true
			}
			return 0, false
		},
	}, nil
}

// Intact reports whether the rules' chains are still there.
func (p *writer) Intact(ctx context.Context) (bool, error) {
	for _, c := range Chains {
		ok, err := p.cfg.Executor.ChainExists(ctx, "nat", c)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// applyRules ensures the jumps and chains, then rewrites the chains.
func (p *writer) applyRules(ctx context.Context, data []byte) error {
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
		return proxy.RestoreFailed(fmt.Errorf("iptables-restore of %d bytes: %w", len(data), err))
	}
	return nil
}

// syncPort brings one service port's sockets in line with the snapshot.
func (p *writer) syncPort(snap *svcstate.Snapshot, n svcstate.ServicePortName) error {
	sp, eps := snap.Port(n)
	cur := p.ports[n]
	if sp != nil {
		sp = sp.ForFamily(p.cfg.Rules.Family)
	}
	if sp == nil || !sp.ClusterIP(p.cfg.Rules.Family).IsValid() || (sp.Protocol != v1.ProtocolTCP && sp.Protocol != v1.ProtocolUDP) {
		if sp != nil && sp.Protocol == v1.ProtocolSCTP {
			p.log.Warn("SCTP is not proxied in userspace mode", "servicePort", n.String())
		}
		if cur != nil {
			cur.closeAll()
			delete(p.ports, n)
		}
		return nil
	}
	var mine []svcstate.Endpoint
	for _, e := range eps {
		if svcstate.Family(e.IP) == p.cfg.Rules.Family {
			mine = append(mine, e)
		}
	}
	sel := proxy.Select(sp, mine, p.cfg.Rules.Node)
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

func (p *writer) open(sp *svcstate.ServicePort) (socket, error) {
	bal := newBalancer(p.cfg.Sync.Now)
	logger := p.log.With("servicePort", sp.Name.String())
	var onFail func()
	if m := p.cfg.Sync.Metrics; m != nil {
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
func (p *writer) portals() []Portal {
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
		out = append(out, Portal{Name: n, Protocol: proto, Addrs: []netip.Addr{sp.ClusterIP(p.cfg.Rules.Family)}, Port: sp.Port,
			ProxyPort: s.internal.port()})
		external := slices.Concat(sp.ExternalIPs, sp.LoadBalancerIPs)
		if len(external) > 0 || sp.NodePort != 0 {
			out = append(out, Portal{Name: n, Protocol: proto, Addrs: external, Port: sp.Port, NodePort: sp.NodePort,
				ProxyPort: ext.port()})
		}
	}
	return out
}
