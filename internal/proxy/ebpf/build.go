// Package ebpf is the ebpf proxy mode: every Service in the maps of
// svcnet's socket-level load balancer (internal/bpflb), no rule per
// Service or endpoint anywhere. A client's connect to a service address
// is translated once, at the socket, to one endpoint's address.
//
// Build turns a snapshot into the maps' contents, purely; the Proxier
// writes the difference to the kernel as a mode of proxy.Syncer.
package ebpf

import (
	"fmt"
	"net/netip"
	"slices"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/bpflb"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// Config is what the maps depend on besides the snapshot.
type Config struct {
	proxy.NodeConfig
	// Maglev picks the backend of a flow from outside the node by
	// Maglev consistent hashing (the same on every node, and a backend
	// leaving moves little more than its own flows) rather than at
	// random.
	Maglev bool
}

// Validate reports settings that cannot work.
func (c Config) Validate() error { return c.NodeConfig.Validate("ebpf") }

// Scope says who a backend set is for. The node's own clients (a pod, a
// node process) are translated at the socket: the cluster IP's set
// follows the internal traffic policy; node ports, external and
// load-balancer addresses reached from inside the node go to the whole
// cluster's endpoints whatever the external policy, as kube-proxy
// short-circuits traffic from pods and the node to them. Clients outside
// the node are translated per packet, with the external policy.
type Scope uint8

const (
	Internal Scope = iota
	External
	// Firewalled: load-balancer addresses whose source ranges do not
	// admit every client of the node (see fromInsideAllowed).
	Firewalled
	// Outside: node ports, external and load-balancer addresses for
	// clients outside the node; OutsideRanged: load-balancer addresses
	// with source ranges.
	Outside
	OutsideRanged
)

func (s Scope) String() string {
	switch s {
	case External:
		return "external"
	case Firewalled:
		return "firewalled"
	case Outside:
		return "outside"
	case OutsideRanged:
		return "outside-ranged"
	}
	return "internal"
}

// packet says whether the scope's entries are for packets from outside.
func (s Scope) packet() bool { return s == Outside || s == OutsideRanged }

// TargetName names a backend set: one service port, one scope. A set
// read from the kernel is known by its ID only.
type TargetName struct {
	Port  svcstate.ServicePortName
	Scope Scope
	ID    uint32
}

func (n TargetName) String() string {
	if n.Port == (svcstate.ServicePortName{}) {
		return fmt.Sprintf("backend set %d", n.ID)
	}
	return n.Port.String() + "/" + n.Scope.String()
}

// Target is a backend set and what a client gets without one.
type Target struct {
	Backends []netip.AddrPort // in endpoint order
	Verdict  bpflb.Verdict    // when Backends is empty
	Affinity uint32           // ClientIP affinity timeout in seconds, 0: none
	// Ranges are the sources an entry with bpflb.Ranged admits.
	Ranges []netip.Prefix
	// Maglev: the set has a Maglev table (its entries bpflb.Maglev).
	Maglev bool
}

func (t Target) equal(o Target) bool {
	return slices.Equal(t.Backends, o.Backends) && t.Verdict == o.Verdict && t.Affinity == o.Affinity &&
		slices.Equal(t.Ranges, o.Ranges) && t.Maglev == o.Maglev
}

// Table is what the maps should hold for some service ports: their
// service entries, and the backend set each names.
type Table struct {
	Keys map[bpflb.ServiceKey]TargetName
	// Flags are the entries' flags, where they have any.
	Flags   map[bpflb.ServiceKey]bpflb.Flags
	Targets map[TargetName]Target
	// Ports are the service ports built, with the keys of each.
	Ports map[svcstate.ServicePortName][]bpflb.ServiceKey
	// Conflicts are the addresses two service ports claim (external IPs
	// two Services list, say): each goes to the first by name, and the
	// others lose it.
	Conflicts []Conflict
	Stats     Stats
}

// Conflict is an address a service port lost to another.
type Conflict struct {
	Key        bpflb.ServiceKey
	Lost, Kept svcstate.ServicePortName
}

// Drop takes k from the table, and its backend set if no other entry
// names it.
func (t *Table) Drop(k bpflb.ServiceKey) {
	name, ok := t.Keys[k]
	if !ok {
		return
	}
	delete(t.Keys, k)
	delete(t.Flags, k)
	t.Ports[name.Port] = slices.DeleteFunc(t.Ports[name.Port], func(o bpflb.ServiceKey) bool { return o == k })
	for _, o := range t.Ports[name.Port] {
		if t.Keys[o] == name {
			return
		}
	}
	delete(t.Targets, name)
}

// Stats count what a Build found.
type Stats struct {
	ServicePorts, Endpoints int
	NoLocalInternal         int
	Reachable               map[svcstate.ServicePortName]int
}

// Build computes the table of the snapshot's service ports of cfg's
// family; with only set, of those ports alone (a partial sync).
func Build(cfg Config, snap *svcstate.Snapshot, only map[svcstate.ServicePortName]struct{}) Table {
	cfg.NodeConfig = cfg.NodeConfig.WithDefaults()
	n := len(only)
	if only == nil {
		n = snap.Len()
	}
	t := Table{
		Keys:    make(map[bpflb.ServiceKey]TargetName, 2*n),
		Flags:   make(map[bpflb.ServiceKey]bpflb.Flags, n),
		Targets: make(map[TargetName]Target, n),
		Ports:   make(map[svcstate.ServicePortName][]bpflb.ServiceKey, n),
		Stats:   Stats{Reachable: make(map[svcstate.ServicePortName]int, n)},
	}
	add := func(svc *svcstate.Service, p *svcstate.ServicePort) {
		p = p.ForFamily(cfg.Family)
		if !p.Proxied() || !p.ClusterIP(cfg.Family).IsValid() {
			return
		}
		proto, ok := protocol(p.Protocol)
		if !ok {
			return
		}
		eps := slices.DeleteFunc(slices.Clone(svc.Endpoints(p.Name)), func(e svcstate.Endpoint) bool { return svcstate.Family(e.IP) != cfg.Family })
		sel := proxy.Select(p, eps, cfg.Node)
		t.build(cfg, p, proto, sel)
	}
	if only != nil {
		for n := range only {
			svc := snap.Service(n.NamespacedName)
			if svc == nil {
				continue
			}
			if p := svc.Port(n); p != nil {
				add(svc, p)
			}
		}
		return t
	}
	for svc := range snap.All {
		for _, p := range svc.Ports {
			add(svc, p)
		}
	}
	return t
}

func protocol(p v1.Protocol) (uint8, bool) {
	switch p {
	case v1.ProtocolTCP:
		return unix.IPPROTO_TCP, true
	case v1.ProtocolUDP:
		return unix.IPPROTO_UDP, true
	case v1.ProtocolSCTP:
		return unix.IPPROTO_SCTP, true
	}
	return 0, false
}

func backends(eps []svcstate.Endpoint) []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(eps))
	for _, e := range eps {
		out = append(out, netip.AddrPortFrom(e.IP, uint16(e.Port)))
	}
	return out
}

func (t *Table) build(cfg Config, p *svcstate.ServicePort, proto uint8, sel proxy.Selection) {
	t.Stats.ServicePorts++
	t.Stats.Endpoints += len(sel.Reachable)
	t.Stats.Reachable[p.Name] = len(sel.Reachable)
	var affinity uint32
	if p.SessionAffinityClientIP {
		affinity = uint32(p.StickyMaxAgeSeconds)
	}
	internal := Target{Affinity: affinity}
	switch sel.Internal(p) {
	case proxy.Forward:
		eps := sel.Cluster
		if p.InternalPolicyLocal {
			eps = sel.Local
		}
		internal.Backends = backends(eps)
	case proxy.Drop:
		internal.Verdict = bpflb.Drop
		t.Stats.NoLocalInternal++
	default:
		internal.Verdict = bpflb.Reject
	}
	// A set is in the table when an entry names it.
	key := func(a netip.Addr, port int, name TargetName, target Target, flags bpflb.Flags) {
		k := bpflb.ServiceKey{Addr: a, Port: uint16(port), Proto: proto}
		if name.Scope.packet() || flags != 0 {
			k.Scope = bpflb.Packet
		}
		other, ok := t.Keys[k]
		if ok && other.Port == p.Name {
			return // an address the port has already (a node port on an external IP)
		}
		if ok {
			// The same for any order of the build: the first by name.
			if other.Port.Compare(p.Name) < 0 {
				t.Conflicts = append(t.Conflicts, Conflict{Key: k, Lost: p.Name, Kept: other.Port})
				return
			}
			t.Conflicts = append(t.Conflicts, Conflict{Key: k, Lost: other.Port, Kept: p.Name})
			t.Drop(k)
		}
		t.Keys[k] = name
		if flags != 0 {
			t.Flags[k] = flags
		}
		t.Targets[name] = target
		t.Ports[p.Name] = append(t.Ports[p.Name], k)
	}
	in := TargetName{Port: p.Name, Scope: Internal}
	key(p.ClusterIP(cfg.Family), p.Port, in, internal, 0)
	// A client outside the node whose packets are routed to the cluster
	// IP: masqueraded, as kube-proxy masquerades off-cluster sources.
	key(p.ClusterIP(cfg.Family), p.Port, in, internal, bpflb.Masquerade)
	if !p.ExternallyAccessible() {
		return
	}
	// From inside the node, the external addresses reach the whole
	// cluster's endpoints; when the internal set is the same, they
	// share it.
	ext, external := in, internal
	if p.InternalPolicyLocal {
		ext = TargetName{Port: p.Name, Scope: External}
		external = Target{Affinity: affinity, Verdict: bpflb.Reject}
		if len(sel.Cluster) > 0 {
			external.Backends = backends(sel.Cluster)
		}
	}
	if p.NodePort != 0 {
		addrs := cfg.NodePortAddresses
		if len(addrs) == 0 {
			addrs = cfg.NodeIPs
		}
		for _, a := range addrs {
			key(a, p.NodePort, ext, external, 0)
		}
	}
	for _, a := range p.ExternalIPs {
		key(a, p.Port, ext, external, 0)
	}
	lb, balanced := ext, external
	if p.SourceRangesSet && !fromInsideAllowed(cfg, p.LoadBalancerSourceRanges) {
		// A socket has no source address yet when it connects: the
		// source ranges can be honoured only for every client of the
		// node at once. Unless they admit the whole pod network and the
		// node's addresses, the node's clients are refused.
		lb, balanced = TargetName{Port: p.Name, Scope: Firewalled}, Target{Verdict: bpflb.Drop}
	}
	for _, a := range p.LoadBalancerIPs {
		key(a, p.Port, lb, balanced, 0)
	}

	// Clients outside the node, with the external policy: the Local one
	// keeps the client's address and goes to this node's endpoints only;
	// the Cluster one masquerades, so that replies come back here.
	out := TargetName{Port: p.Name, Scope: Outside}
	outside := Target{Affinity: affinity}
	var masq bpflb.Flags
	switch sel.External(p) {
	case proxy.Forward:
		if p.ExternalPolicyLocal {
			outside.Backends = backends(sel.Local)
		} else {
			outside.Backends, masq = backends(sel.Cluster), bpflb.Masquerade
		}
		if cfg.Maglev && affinity == 0 {
			outside.Maglev, masq = true, masq|bpflb.Maglev
		}
	case proxy.Drop:
		outside.Verdict = bpflb.Drop
	default:
		outside.Verdict = bpflb.Reject
	}
	if p.NodePort != 0 {
		addrs := cfg.NodePortAddresses
		if len(addrs) == 0 {
			addrs = cfg.NodeIPs
		}
		for _, a := range addrs {
			key(a, p.NodePort, out, outside, masq)
		}
	}
	for _, a := range p.ExternalIPs {
		key(a, p.Port, out, outside, masq)
	}
	if p.SourceRangesSet {
		// Ranges of no use in this family admit no one: fail closed. The
		// load-balancer addresses themselves are admitted, as kube-proxy
		// admits them: a backend may reach its Service through the load
		// balancer with its address as the source.
		ranged := outside
		for _, r := range p.LoadBalancerSourceRanges {
			ranged.Ranges = append(ranged.Ranges, r.Masked())
		}
		for _, a := range p.LoadBalancerIPs {
			ranged.Ranges = append(ranged.Ranges, netip.PrefixFrom(a, a.BitLen()))
		}
		slices.SortFunc(ranged.Ranges, netip.Prefix.Compare)
		ranged.Ranges = slices.Compact(ranged.Ranges)
		for _, a := range p.LoadBalancerIPs {
			key(a, p.Port, TargetName{Port: p.Name, Scope: OutsideRanged}, ranged, masq|bpflb.Ranged)
		}
		return
	}
	for _, a := range p.LoadBalancerIPs {
		key(a, p.Port, out, outside, masq)
	}
}

// fromInsideAllowed says whether source ranges admit every client the
// node has: its pods (the cluster CIDR) and its own addresses.
func fromInsideAllowed(cfg Config, ranges []netip.Prefix) bool {
	covers := func(want netip.Prefix) bool {
		return slices.ContainsFunc(ranges, func(r netip.Prefix) bool { return r.Bits() <= want.Bits() && r.Contains(want.Addr()) })
	}
	if !cfg.ClusterCIDR.IsValid() || !covers(cfg.ClusterCIDR) {
		return false
	}
	for _, a := range cfg.NodeIPs {
		if !covers(netip.PrefixFrom(a, a.BitLen())) {
			return false
		}
	}
	return true
}
