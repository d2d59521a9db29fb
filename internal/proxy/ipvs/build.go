// Package ipvs is the service proxy's ipvs mode, kube-proxy's layout: every
// service address bound to the dummy link kube-ipvs0, one IPVS virtual
// server per address, protocol and port with the endpoints as real
// servers (masquerade forwarding), and ipsets matched by a few iptables
// rules for masquerading, node ports, source ranges and filtering.
//
// Build is pure: the whole desired state from a snapshot. The proxier
// (proxier.go) reads what the kernel holds and changes only what
// differs, through internal/ipvs, internal/ipset and internal/iptables.
package ipvs

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/ipset"
	kipvs "github.com/svcnet/svcnet/internal/ipvs"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// DummyLink holds every service address so that IPVS (which works on the
// LOCAL_IN hook) sees packets for them as local.
const DummyLink = "kube-ipvs0"

// Config is what the state depends on besides the snapshot.
type Config struct {
	proxy.NodeConfig
	// AllNodePortAddresses makes the proxier fill NodePortAddresses at
	// each sync with every address of the node but loopback and
	// kube-ipvs0's, as kube-proxy does without --nodeport-addresses;
	// otherwise they are the addresses that get a virtual server per node
	// port.
	AllNodePortAddresses bool
	// LocalAddresses are the node's addresses on links other than
	// kube-ipvs0: an external or load-balancer IP already there is not
	// bound again.
	LocalAddresses []netip.Addr
	// Scheduler is every virtual server's (--ipvs-scheduler); rr by
	// default.
	Scheduler string
}

func (c Config) withDefaults() Config {
	c.NodeConfig = c.NodeConfig.WithDefaults()
	if c.Scheduler == "" {
		c.Scheduler = "rr"
	}
	return c
}

func (c Config) masqMark() string { return fmt.Sprintf("%#08x", 1<<c.MasqueradeBit) }

// VirtualServer is one IPVS service and its real servers.
type VirtualServer struct {
	kipvs.Service
	Destinations []netip.AddrPort
	// ServicePort is the service port it serves, for logs and the tracer.
	ServicePort svcstate.ServicePortName
	// Kind is "cluster-ip", "external-ip", "load-balancer" or "node-port".
	Kind string
}

// State is everything the ipvs mode writes for one family.
type State struct {
	// Addresses are bound on kube-ipvs0, sorted.
	Addresses []netip.Addr
	// Servers by key.
	Servers map[kipvs.Key]*VirtualServer
	// Sets are every set the mode uses, with their entries (empty ones
	// too: the rules name them).
	Sets []ipset.Set
	// Rules is the iptables-restore input for the mode's nat and filter
	// chains (--noflush: only those chains are replaced).
	Rules string
	Stats Stats
}

// Stats count what the state holds, for metrics and logs.
type Stats struct {
	ServicePorts, Endpoints int
	// Reachable is, per service port, how many endpoints its virtual
	// servers send to.
	Reachable map[svcstate.ServicePortName]int
	// NATRules and FilterRules are the restore's rule lines.
	NATRules, FilterRules int
}

// Set names (IPv4; IPv6 ones start KUBE-6-, cut at ipset's 31 characters).
const (
	SetLoopBack                = "KUBE-LOOP-BACK"
	SetClusterIP               = "KUBE-CLUSTER-IP"
	SetExternalIP              = "KUBE-EXTERNAL-IP"
	SetExternalIPLocal         = "KUBE-EXTERNAL-IP-LOCAL"
	SetLoadBalancer            = "KUBE-LOAD-BALANCER"
	SetLoadBalancerLocal       = "KUBE-LOAD-BALANCER-LOCAL"
	SetLoadBalancerFW          = "KUBE-LOAD-BALANCER-FW"
	SetLoadBalancerSourceCIDR  = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	SetLoadBalancerSourceIP    = "KUBE-LOAD-BALANCER-SOURCE-IP"
	SetNodePortTCP             = "KUBE-NODE-PORT-TCP"
	SetNodePortLocalTCP        = "KUBE-NODE-PORT-LOCAL-TCP"
	SetNodePortUDP             = "KUBE-NODE-PORT-UDP"
	SetNodePortLocalUDP        = "KUBE-NODE-PORT-LOCAL-UDP"
	SetNodePortSCTP            = "KUBE-NODE-PORT-SCTP-HASH"
	SetNodePortLocalSCTP       = "KUBE-NODE-PORT-LOCAL-SCTP-HASH"
	SetHealthCheckNodePort     = "KUBE-HEALTH-CHECK-NODE-PORT"
	SetIPVSAddresses           = "KUBE-IPVS-IPS"
	commentLoopBack            = "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"
	commentClusterIP           = "Kubernetes service cluster ip + port for masquerade purpose"
	commentExternalIP          = "Kubernetes service external ip + port for masquerade and filter purpose"
	commentExternalIPLocal     = "Kubernetes service external ip + port with externalTrafficPolicy=local"
	commentLoadBalancer        = "Kubernetes service lb portal"
	commentLoadBalancerLocal   = "Kubernetes service load balancer ip + port with externalTrafficPolicy=local"
	commentLoadBalancerFW      = "Kubernetes service load balancer ip + port for load balancer with sourceRange"
	commentLoadBalancerSrcCIDR = "Kubernetes service load balancer ip + port + source cidr for packet filter purpose"
	commentLoadBalancerSrcIP   = "Kubernetes service load balancer ip + port + source IP for packet filter purpose"
	commentNodePortTCP         = "Kubernetes nodeport TCP port for masquerade purpose"
	commentNodePortLocalTCP    = "Kubernetes nodeport TCP port with externalTrafficPolicy=local"
	commentNodePortUDP         = "Kubernetes nodeport UDP port for masquerade purpose"
	commentNodePortLocalUDP    = "Kubernetes nodeport UDP port with externalTrafficPolicy=local"
	commentNodePortSCTP        = "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'"
	commentNodePortLocalSCTP   = "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'"
	commentHealthCheckNodePort = "Kubernetes health check node port"
	commentIPVSAddresses       = "Addresses on the ipvs interface"
)

// setSpec is one set's type and comment.
type setSpec struct{ name, typ, comment string }

var setSpecs = []setSpec{
	{SetLoopBack, "hash:ip,port,ip", commentLoopBack},
	{SetClusterIP, "hash:ip,port", commentClusterIP},
	{SetExternalIP, "hash:ip,port", commentExternalIP},
	{SetExternalIPLocal, "hash:ip,port", commentExternalIPLocal},
	{SetLoadBalancer, "hash:ip,port", commentLoadBalancer},
	{SetLoadBalancerLocal, "hash:ip,port", commentLoadBalancerLocal},
	{SetLoadBalancerFW, "hash:ip,port", commentLoadBalancerFW},
	{SetLoadBalancerSourceCIDR, "hash:ip,port,net", commentLoadBalancerSrcCIDR},
	{SetLoadBalancerSourceIP, "hash:ip,port,ip", commentLoadBalancerSrcIP},
	{SetNodePortTCP, "bitmap:port", commentNodePortTCP},
	{SetNodePortLocalTCP, "bitmap:port", commentNodePortLocalTCP},
	{SetNodePortUDP, "bitmap:port", commentNodePortUDP},
	{SetNodePortLocalUDP, "bitmap:port", commentNodePortLocalUDP},
	{SetNodePortSCTP, "hash:ip,port", commentNodePortSCTP},
	{SetNodePortLocalSCTP, "hash:ip,port", commentNodePortLocalSCTP},
	{SetHealthCheckNodePort, "bitmap:port", commentHealthCheckNodePort},
	{SetIPVSAddresses, "hash:ip", commentIPVSAddresses},
}

// SetName is a set's name in family f.
func SetName(name string, f v1.IPFamily) string {
	if f != v1.IPv6Protocol {
		return name
	}
	n := "KUBE-6-" + strings.TrimPrefix(name, "KUBE-")
	if len(n) > 31 {
		n = n[:31]
	}
	return n
}

// SetNames are every set name the mode uses in family f.
func SetNames(f v1.IPFamily) []string {
	var out []string
	for _, s := range setSpecs {
		out = append(out, SetName(s.name, f))
	}
	return out
}

// builder accumulates the state.
type builder struct {
	cfg     Config
	st      *State
	entries map[string]map[string]bool // set -> entries
	bound   map[netip.Addr]bool
	local   map[netip.Addr]bool
}

func (b *builder) add(set, entry string) {
	m := b.entries[set]
	if m == nil {
		m = map[string]bool{}
		b.entries[set] = m
	}
	m[entry] = true
}

func (b *builder) has(set string) bool { return len(b.entries[set]) > 0 }

// Build computes the state for snap.
func Build(cfg Config, snap *svcstate.Snapshot) *State {
	cfg = cfg.withDefaults()
	b := &builder{cfg: cfg, st: &State{Servers: map[kipvs.Key]*VirtualServer{}, Stats: Stats{Reachable: map[svcstate.ServicePortName]int{}}},
		entries: map[string]map[string]bool{}, bound: map[netip.Addr]bool{}, local: map[netip.Addr]bool{}}
	for _, a := range cfg.LocalAddresses {
		b.local[a] = true
	}
	for _, svc := range snap.Sorted() {
		for _, p := range svc.Ports {
			b.port(p.ForFamily(cfg.Family), svc)
		}
	}
	for a := range b.bound {
		b.st.Addresses = append(b.st.Addresses, a)
		b.add(SetIPVSAddresses, a.String())
	}
	slices.SortFunc(b.st.Addresses, netip.Addr.Compare)
	family := "inet"
	if cfg.Family == v1.IPv6Protocol {
		family = "inet6"
	}
	for _, s := range setSpecs {
		set := ipset.Set{Name: SetName(s.name, cfg.Family), Type: s.typ, Comment: s.comment}
		if s.typ != "bitmap:port" {
			set.Family = family
		}
		for e := range b.entries[s.name] {
			set.Entries = append(set.Entries, e)
		}
		slices.Sort(set.Entries)
		b.st.Sets = append(b.st.Sets, set)
	}
	b.st.Rules = b.rules()
	return b.st
}

func protoName(p v1.Protocol) string { return strings.ToLower(string(p)) }

func ipvsProto(p v1.Protocol) uint16 {
	switch p {
	case v1.ProtocolUDP:
		return kipvs.UDP
	case v1.ProtocolSCTP:
		return kipvs.SCTP
	}
	return kipvs.TCP
}

// port adds one service port: its virtual servers, addresses and set
// entries.
func (b *builder) port(p *svcstate.ServicePort, svc *svcstate.Service) {
	if p == nil || !p.Proxied() {
		return
	}
	cfg := b.cfg
	sel := proxy.Select(p, svc.Endpoints(p.Name), cfg.Node)
	b.st.Stats.ServicePorts++
	b.st.Stats.Endpoints += len(sel.Reachable)
	b.st.Stats.Reachable[p.Name] = len(sel.Reachable)
	if !sel.HasAny {
		// No endpoint anywhere: no virtual server, and the address (still
		// bound) is not in the sets that let traffic through, so
		// KUBE-IPVS-FILTER rejects new connections at once, as the other
		// modes do. kube-proxy's ipvs mode keeps an empty virtual server,
		// which drops them: clients wait for their timeout. (A Local
		// policy with endpoints elsewhere only keeps its empty virtual
		// server, which drops, as the other modes drop.)
		for _, ip := range p.ClusterIPs {
			b.bound[ip] = true
		}
		for _, ip := range append(slices.Clone(p.ExternalIPs), p.LoadBalancerIPs...) {
			if !b.local[ip] {
				b.bound[ip] = true
			}
		}
		return
	}
	ipPort := func(a netip.Addr, port int) string {
		return a.String() + "," + protoName(p.Protocol) + ":" + strconv.Itoa(port)
	}
	// Local policy without a local endpoint falls back to the cluster's
	// endpoints in kube-proxy's ipvs mode (unlike its other modes, which
	// drop): pods on the node still reach the Service.
	pick := func(local bool) []svcstate.Endpoint {
		if local && len(sel.Local) > 0 {
			return sel.Local
		}
		return sel.Cluster
	}
	internal := pick(p.InternalPolicyLocal)
	external := pick(p.ExternalPolicyLocal)

	for _, e := range sel.Reachable {
		if e.IsLocal {
			b.add(SetLoopBack, e.IP.String()+","+protoName(p.Protocol)+":"+strconv.Itoa(e.Port)+","+e.IP.String())
		}
	}
	svcFlags, timeout := uint32(0), uint32(0)
	if p.SessionAffinityClientIP {
		svcFlags, timeout = kipvs.FlagPersistent, uint32(p.StickyMaxAgeSeconds)
	}
	vs := func(a netip.Addr, port int, eps []svcstate.Endpoint, kind string) {
		s := kipvs.Service{Addr: a, Protocol: ipvsProto(p.Protocol), Port: uint16(port), Scheduler: cfg.Scheduler, Flags: svcFlags, Timeout: timeout}
		if cfg.Scheduler == "mh" {
			s.Flags |= 0x10 // IP_VS_SVC_F_SCHED2: hash the source port too
		}
		v := &VirtualServer{Service: s, ServicePort: p.Name, Kind: kind}
		for _, e := range eps {
			v.Destinations = append(v.Destinations, netip.AddrPortFrom(e.IP, uint16(e.Port)))
		}
		slices.SortFunc(v.Destinations, netip.AddrPort.Compare)
		v.Destinations = slices.Compact(v.Destinations)
		b.st.Servers[s.Key()] = v
	}

	for _, ip := range p.ClusterIPs {
		b.add(SetClusterIP, ipPort(ip, p.Port))
		b.bound[ip] = true
		vs(ip, p.Port, internal, "cluster-ip")
	}
	for _, ip := range p.ExternalIPs {
		if p.ExternalPolicyLocal {
			b.add(SetExternalIPLocal, ipPort(ip, p.Port))
		} else {
			b.add(SetExternalIP, ipPort(ip, p.Port))
		}
		if !b.local[ip] {
			b.bound[ip] = true
		}
		vs(ip, p.Port, external, "external-ip")
	}
	for _, ip := range p.LoadBalancerIPs {
		b.add(SetLoadBalancer, ipPort(ip, p.Port))
		if p.ExternalPolicyLocal {
			b.add(SetLoadBalancerLocal, ipPort(ip, p.Port))
		}
		if p.SourceRangesSet {
			b.add(SetLoadBalancerFW, ipPort(ip, p.Port))
			for _, r := range p.LoadBalancerSourceRanges {
				if r.Addr().BitLen() != ip.BitLen() {
					continue
				}
				b.add(SetLoadBalancerSourceCIDR, ipPort(ip, p.Port)+","+r.String())
				if slices.ContainsFunc(cfg.NodeIPs, r.Contains) {
					// The node's own traffic to the address comes from
					// the address (it is local): let it through.
					b.add(SetLoadBalancerSourceIP, ipPort(ip, p.Port)+","+ip.String())
				}
			}
		}
		if !b.local[ip] {
			b.bound[ip] = true
		}
		vs(ip, p.Port, external, "load-balancer")
	}
	if p.NodePort != 0 && len(cfg.NodePortAddresses) > 0 {
		switch p.Protocol {
		case v1.ProtocolTCP, v1.ProtocolUDP:
			set, local := SetNodePortTCP, SetNodePortLocalTCP
			if p.Protocol == v1.ProtocolUDP {
				set, local = SetNodePortUDP, SetNodePortLocalUDP
			}
			b.add(set, strconv.Itoa(p.NodePort))
			if p.ExternalPolicyLocal {
				b.add(local, strconv.Itoa(p.NodePort))
			}
		case v1.ProtocolSCTP:
			for _, a := range cfg.NodePortAddresses {
				b.add(SetNodePortSCTP, ipPort(a, p.NodePort))
				if p.ExternalPolicyLocal {
					b.add(SetNodePortLocalSCTP, ipPort(a, p.NodePort))
				}
			}
		}
		for _, a := range cfg.NodePortAddresses {
			vs(a, p.NodePort, external, "node-port")
		}
		if p.HealthCheckNodePort != 0 {
			b.add(SetHealthCheckNodePort, strconv.Itoa(p.HealthCheckNodePort))
		}
	}
}

// rules renders the mode's chains as iptables-restore input: kube-proxy's
// ipvs rules, in its order.
func (b *builder) rules() string {
	cfg := b.cfg
	set := func(name string) string { return SetName(name, cfg.Family) }
	mark := cfg.masqMark()
	var nat, filter []string
	n := func(format string, a ...any) { nat = append(nat, fmt.Sprintf(format, a...)) }
	f := func(format string, a ...any) { filter = append(filter, fmt.Sprintf(format, a...)) }
	loopback := "127.0.0.0/8"
	if cfg.Family == v1.IPv6Protocol {
		loopback = "::1/128"
	}

	n("-A KUBE-SERVICES -s %s -j RETURN", loopback)
	if b.has(SetLoadBalancer) {
		n(`-A KUBE-SERVICES -m comment --comment %q -m set --match-set %s dst,dst -j KUBE-LOAD-BALANCER`, commentLoadBalancer, set(SetLoadBalancer))
	}
	if b.has(SetClusterIP) {
		switch {
		case cfg.MasqueradeAll:
			n(`-A KUBE-SERVICES -m comment --comment %q -m set --match-set %s dst,dst -j KUBE-MARK-MASQ`, commentClusterIP, set(SetClusterIP))
		case cfg.ClusterCIDR.IsValid():
			n(`-A KUBE-SERVICES -m comment --comment %q -m set --match-set %s dst,dst ! -s %s -j KUBE-MARK-MASQ`, commentClusterIP, set(SetClusterIP), cfg.ClusterCIDR)
		default:
			n(`-A KUBE-SERVICES -m comment --comment %q -m set --match-set %s src,dst -j KUBE-MARK-MASQ`, commentClusterIP, set(SetClusterIP))
		}
	}
	externalAccept := func(name, comment string) {
		n(`-A KUBE-SERVICES -m comment --comment %q -m set --match-set %s dst,dst -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT`, comment, set(name))
		n(`-A KUBE-SERVICES -m comment --comment %q -m set --match-set %s dst,dst -m addrtype --dst-type LOCAL -j ACCEPT`, comment, set(name))
	}
	if b.has(SetExternalIP) {
		n(`-A KUBE-SERVICES -m comment --comment %q -m set --match-set %s dst,dst -j KUBE-MARK-MASQ`, commentExternalIP, set(SetExternalIP))
		externalAccept(SetExternalIP, commentExternalIP)
	}
	if b.has(SetExternalIPLocal) {
		externalAccept(SetExternalIPLocal, commentExternalIPLocal)
	}
	n("-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT")
	if b.has(SetClusterIP) {
		n("-A KUBE-SERVICES -m set --match-set %s dst,dst -j ACCEPT", set(SetClusterIP))
	}
	if b.has(SetLoadBalancer) {
		n("-A KUBE-SERVICES -m set --match-set %s dst,dst -j ACCEPT", set(SetLoadBalancer))
	}

	if b.has(SetLoadBalancerLocal) {
		n(`-A KUBE-LOAD-BALANCER -m comment --comment %q -m set --match-set %s dst,dst -j RETURN`, commentLoadBalancerLocal, set(SetLoadBalancerLocal))
	}
	n("-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ")

	for _, np := range []struct{ proto, local, all, localComment, allComment, dir string }{
		{"tcp", SetNodePortLocalTCP, SetNodePortTCP, commentNodePortLocalTCP, commentNodePortTCP, "dst"},
		{"udp", SetNodePortLocalUDP, SetNodePortUDP, commentNodePortLocalUDP, commentNodePortUDP, "dst"},
		{"sctp", SetNodePortLocalSCTP, SetNodePortSCTP, commentNodePortLocalSCTP, commentNodePortSCTP, "dst,dst"},
	} {
		if b.has(np.local) {
			n(`-A KUBE-NODE-PORT -p %s -m comment --comment %q -m set --match-set %s %s -j RETURN`, np.proto, np.localComment, set(np.local), np.dir)
		}
		if b.has(np.all) {
			n(`-A KUBE-NODE-PORT -p %s -m comment --comment %q -m set --match-set %s %s -j KUBE-MARK-MASQ`, np.proto, np.allComment, set(np.all), np.dir)
		}
	}

	if b.has(SetLoopBack) {
		n(`-A KUBE-POSTROUTING -m comment --comment %q -m set --match-set %s dst,dst,src -j MASQUERADE`, commentLoopBack, set(SetLoopBack))
	}
	n("-A KUBE-POSTROUTING -m mark ! --mark %s/%s -j RETURN", mark, mark)
	n("-A KUBE-POSTROUTING -j MARK --xor-mark %s", mark)
	// Fully random source ports, as kube-proxy always asks (Linux 3.13):
	// connections from many pods to one destination do not collide on
	// the masqueraded port (kubernetes#76699).
	n(`-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`)
	n("-A KUBE-MARK-MASQ -j MARK --or-mark %s", mark)

	f(`-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark %s/%s -j ACCEPT`, mark, mark)
	f(`-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`)
	f(`-A KUBE-NODE-PORT -m comment --comment %q -m set --match-set %s dst -j ACCEPT`, commentHealthCheckNodePort, set(SetHealthCheckNodePort))
	if b.has(SetLoadBalancerFW) {
		f(`-A KUBE-PROXY-FIREWALL -m comment --comment %q -m set --match-set %s dst,dst -j KUBE-SOURCE-RANGES-FIREWALL`, commentLoadBalancerFW, set(SetLoadBalancerFW))
	}
	if b.has(SetLoadBalancerSourceCIDR) {
		f(`-A KUBE-SOURCE-RANGES-FIREWALL -m comment --comment %q -m set --match-set %s dst,dst,src -j RETURN`, commentLoadBalancerSrcCIDR, set(SetLoadBalancerSourceCIDR))
	}
	if b.has(SetLoadBalancerSourceIP) {
		f(`-A KUBE-SOURCE-RANGES-FIREWALL -m comment --comment %q -m set --match-set %s dst,dst,src -j RETURN`, commentLoadBalancerSrcIP, set(SetLoadBalancerSourceIP))
	}
	f("-A KUBE-SOURCE-RANGES-FIREWALL -j DROP")
	// The node's own traffic to a load-balancer address whose ranges
	// exclude the node: it comes from the address itself (bound here).
	for _, k := range b.sortedKeys() {
		v := b.st.Servers[k]
		if v.Kind != "load-balancer" || !b.entries[SetLoadBalancerFW][ipPortOf(v)] || b.entries[SetLoadBalancerSourceIP][ipPortOf(v)+","+v.Addr.String()] {
			continue
		}
		f("-A KUBE-IPVS-OUT-FILTER -s %s -m ipvs --vaddr %s --vproto %s --vport %d -j DROP", v.Addr, v.Addr, strings.ToLower(kipvs.ProtocolName(v.Protocol)), v.Port)
	}
	for _, s := range []struct{ name, dir string }{
		{SetLoadBalancer, "dst,dst"}, {SetClusterIP, "dst,dst"}, {SetExternalIP, "dst,dst"},
		{SetExternalIPLocal, "dst,dst"}, {SetHealthCheckNodePort, "dst"},
	} {
		f("-A KUBE-IPVS-FILTER -m set --match-set %s %s -j RETURN", set(s.name), s.dir)
	}
	f("-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set %s dst -j REJECT", set(SetIPVSAddresses))

	b.st.Stats.NATRules, b.st.Stats.FilterRules = len(nat), len(filter)
	var out strings.Builder
	out.WriteString("*nat\n")
	for _, c := range NATChains {
		fmt.Fprintf(&out, ":%s - [0:0]\n", c)
	}
	out.WriteString(strings.Join(nat, "\n") + "\nCOMMIT\n*filter\n")
	for _, c := range FilterChains {
		fmt.Fprintf(&out, ":%s - [0:0]\n", c)
	}
	out.WriteString(strings.Join(filter, "\n") + "\nCOMMIT\n")
	return out.String()
}

func ipPortOf(v *VirtualServer) string {
	return v.Addr.String() + "," + strings.ToLower(kipvs.ProtocolName(v.Protocol)) + ":" + strconv.Itoa(int(v.Service.Port))
}

func (b *builder) sortedKeys() []kipvs.Key {
	keys := make([]kipvs.Key, 0, len(b.st.Servers))
	for k := range b.st.Servers {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	return keys
}

func compareKeys(a, b kipvs.Key) int {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	if a.Protocol != b.Protocol {
		return int(a.Protocol) - int(b.Protocol)
	}
	return int(a.Port) - int(b.Port)
}

// The mode's chains; their contents are replaced by every restore.
var (
	NATChains    = []string{"KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-NODE-PORT", "KUBE-LOAD-BALANCER", "KUBE-MARK-MASQ"}
	FilterChains = []string{"KUBE-FORWARD", "KUBE-NODE-PORT", "KUBE-PROXY-FIREWALL", "KUBE-SOURCE-RANGES-FIREWALL", "KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER"}
)

// JumpRule is a rule in a built-in chain to one of the mode's.
type JumpRule struct{ Table, Chain, Target, Comment string }

// JumpRules are kube-proxy's ipvs jumps, in the order it ensures them
// (each inserted at the top of its chain).
var JumpRules = []JumpRule{
	{"nat", "OUTPUT", "KUBE-SERVICES", "kubernetes service portals"},
	{"nat", "PREROUTING", "KUBE-SERVICES", "kubernetes service portals"},
	{"nat", "POSTROUTING", "KUBE-POSTROUTING", "kubernetes postrouting rules"},
	{"filter", "FORWARD", "KUBE-FORWARD", "kubernetes forwarding rules"},
	{"filter", "INPUT", "KUBE-NODE-PORT", "kubernetes health check rules"},
	{"filter", "INPUT", "KUBE-PROXY-FIREWALL", "kube-proxy firewall rules"},
	{"filter", "FORWARD", "KUBE-PROXY-FIREWALL", "kube-proxy firewall rules"},
	{"filter", "INPUT", "KUBE-IPVS-FILTER", "kubernetes ipvs access filter"},
	{"filter", "OUTPUT", "KUBE-IPVS-OUT-FILTER", "kubernetes ipvs access filter"},
}

// Format renders the state as text, sorted: kube-ipvs0's addresses, the
// virtual servers with their real servers (as ipvsadm -Ln shows them),
// the non-empty sets and the rules. Golden tests compare it.
func (s *State) Format() string {
	var b strings.Builder
	b.WriteString("# " + DummyLink + "\n")
	for _, a := range s.Addresses {
		b.WriteString(a.String() + "\n")
	}
	b.WriteString("# IPVS\n")
	keys := make([]kipvs.Key, 0, len(s.Servers))
	for k := range s.Servers {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	for _, k := range keys {
		v := s.Servers[k]
		fmt.Fprintf(&b, "%s %s %s", kipvs.ProtocolName(k.Protocol), netip.AddrPortFrom(k.Addr, k.Port), v.Scheduler)
		if v.Flags&kipvs.FlagPersistent != 0 {
			fmt.Fprintf(&b, " persistent %d", v.Timeout)
		}
		fmt.Fprintf(&b, " (%s %s)\n", v.Kind, v.ServicePort)
		for _, d := range v.Destinations {
			fmt.Fprintf(&b, "  -> %s Masq 1\n", d)
		}
	}
	for _, set := range s.Sets {
		if len(set.Entries) == 0 {
			continue
		}
		fmt.Fprintf(&b, "# ipset %s %s\n", set.Name, set.Type)
		for _, e := range set.Entries {
			b.WriteString(e + "\n")
		}
	}
	b.WriteString("# iptables-restore\n" + s.Rules)
	return b.String()
}
