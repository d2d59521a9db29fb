package nftables

import (
	"fmt"
	"net/netip"
	"strings"
)

// TableName is kube-proxy's table, in the ip (and ip6) family.
const TableName = "kube-proxy"

// The fixed chains, sets and maps, named as kube-proxy names them so that
// people and tools that know its table find their way in ours.
const (
	ChainFilterPrerouting     = "filter-prerouting"
	ChainFilterInput          = "filter-input"
	ChainFilterForward        = "filter-forward"
	ChainFilterOutput         = "filter-output"
	ChainFilterOutputPostDNAT = "filter-output-post-dnat"
	ChainNATPrerouting        = "nat-prerouting"
	ChainNATOutput            = "nat-output"
	ChainNATPostrouting       = "nat-postrouting"

	ChainServices              = "services"
	ChainServiceEndpointsCheck = "service-endpoints-check"
	ChainNodePortEndpointsChk  = "nodeport-endpoints-check"
	ChainFirewallCheck         = "firewall-check"
	ChainClusterIPsCheck       = "cluster-ips-check"
	ChainMasquerading          = "masquerading"
	ChainMarkForMasquerade     = "mark-for-masquerade"
	ChainReject                = "reject-chain"

	SetClusterIPs           = "cluster-ips"
	SetNodePortIPs          = "nodeport-ips"
	MapNoEndpointServices   = "no-endpoint-services"
	MapNoEndpointNodePorts  = "no-endpoint-nodeports"
	MapFirewallIPs          = "firewall-ips"
	MapServiceIPs           = "service-ips"
	MapServiceNodePorts     = "service-nodeports"
	defaultMasqueradeMark   = "0x4000"
	tableComment            = "rules for kube-proxy"
	noEndpointsMapComment   = "vmap to drop or reject packets to services with no endpoints"
	noEndpointsNPMapComment = "vmap to drop or reject packets to service nodeports with no endpoints"
)

// baseChain is a chain on a netfilter hook. The filter chains run just
// before DNAT (priority dstnat, -100), so that they see the addresses
// clients asked for; the one after DNAT in output sees where locally sent
// packets really go. Priorities are numbers: nft accepts the names
// dstnat and srcnat only on some hooks.
type baseChain struct {
	name, typ, hook, priority string
}

var baseChains = []baseChain{
	{ChainFilterPrerouting, "filter", "prerouting", "-110"},
	{ChainFilterInput, "filter", "input", "-110"},
	{ChainFilterForward, "filter", "forward", "-110"},
	{ChainFilterOutput, "filter", "output", "-110"},
	{ChainFilterOutputPostDNAT, "filter", "output", "-90"},
	{ChainNATPrerouting, "nat", "prerouting", "-100"},
	{ChainNATOutput, "nat", "output", "-100"},
	{ChainNATPostrouting, "nat", "postrouting", "100"},
}

// jump is a rule in a base chain that enters one of the fixed chains; new
// connections only, where the chain filters.
type jump struct {
	from, to string
	newOnly  bool
}

// jumps are in kube-proxy's order. The endpoints checks (which may
// reject) are not hooked in prerouting: older kernels allow reject only
// in input, forward and output.
var jumps = []jump{
	{ChainFilterInput, ChainNodePortEndpointsChk, true},
	{ChainFilterInput, ChainServiceEndpointsCheck, true},
	{ChainFilterForward, ChainServiceEndpointsCheck, true},
	{ChainFilterOutput, ChainServiceEndpointsCheck, true},
	{ChainFilterPrerouting, ChainFirewallCheck, true},
	{ChainFilterOutput, ChainFirewallCheck, true},
	{ChainNATOutput, ChainServices, false},
	{ChainNATPrerouting, ChainServices, false},
	{ChainNATPostrouting, ChainMasquerading, false},
	{ChainFilterForward, ChainClusterIPsCheck, true},
	{ChainFilterOutputPostDNAT, ChainClusterIPsCheck, true},
}

// Layout is what the fixed part of the table depends on.
type Layout struct {
	IPv6 bool
	// MasqueradeMark is the packet mark bit for masquerading (kube-proxy's
	// 0x4000 when empty).
	MasqueradeMark string
	// ServiceCIDRs: traffic to unallocated addresses in them is dropped.
	ServiceCIDRs []netip.Prefix
	// NodePortIPs accept NodePort traffic; none means every local address
	// but loopback (kube-proxy's --nodeport-addresses unset).
	NodePortIPs []netip.Addr
}

// Fixed renders the table with its fixed sets, maps and chains, as an
// nft script that creates it (the per-service chains and the map and set
// elements are added to it by the syncs).
func (l Layout) Fixed() string {
	ip, addrType, noLocalhost := "ip", "ipv4_addr", "ip daddr != 127.0.0.0/8"
	if l.IPv6 {
		ip, addrType, noLocalhost = "ip6", "ipv6_addr", "ip6 daddr != ::1"
	}
	mark := l.MasqueradeMark
	if mark == "" {
		mark = defaultMasqueradeMark
	}
	rules := map[string][]string{}
	add := func(chain string, rule ...string) { rules[chain] = append(rules[chain], strings.Join(rule, " ")) }
	for _, j := range jumps {
		if j.newOnly {
			add(j.from, "ct state new jump", j.to)
		} else {
			add(j.from, "jump", j.to)
		}
	}
	add(ChainMarkForMasquerade, "mark set mark or", mark)
	add(ChainMasquerading, "mark and", mark, "== 0 return")
	add(ChainMasquerading, "mark set mark xor", mark)
	add(ChainMasquerading, "masquerade fully-random")
	add(ChainClusterIPsCheck, ip, "daddr @"+SetClusterIPs, `reject comment "Reject traffic to invalid ports of ClusterIPs"`)
	if len(l.ServiceCIDRs) > 0 {
		cidrs := make([]string, len(l.ServiceCIDRs))
		for i, c := range l.ServiceCIDRs {
			cidrs[i] = c.Masked().String()
		}
		add(ChainClusterIPsCheck, ip, "daddr {", strings.Join(cidrs, ", "), `} drop comment "Drop traffic to unallocated ClusterIPs"`)
	}
	add(ChainReject, "reject")
	add(ChainServiceEndpointsCheck, ip, "daddr . meta l4proto . th dport vmap @"+MapNoEndpointServices)
	add(ChainFirewallCheck, ip, "daddr . meta l4proto . th dport vmap @"+MapFirewallIPs)
	add(ChainServices, ip, "daddr . meta l4proto . th dport vmap @"+MapServiceIPs)
	if len(l.NodePortIPs) == 0 {
		add(ChainNodePortEndpointsChk, noLocalhost, "meta l4proto . th dport vmap @"+MapNoEndpointNodePorts)
		add(ChainServices, "fib daddr type local", noLocalhost, "meta l4proto . th dport vmap @"+MapServiceNodePorts)
	} else {
		add(ChainNodePortEndpointsChk, ip, "daddr @"+SetNodePortIPs, "meta l4proto . th dport vmap @"+MapNoEndpointNodePorts)
		add(ChainServices, ip, "daddr @"+SetNodePortIPs, "meta l4proto . th dport vmap @"+MapServiceNodePorts)
	}

	var b strings.Builder
	family := "ip"
	if l.IPv6 {
		family = "ip6"
	}
	fmt.Fprintf(&b, "table %s %s {\n\tcomment %q\n", family, TableName, tableComment)
	set := func(name, comment string, elems []string) {
		fmt.Fprintf(&b, "\tset %s {\n\t\ttype %s\n\t\tcomment %q\n", name, addrType, comment)
		if len(elems) > 0 {
			fmt.Fprintf(&b, "\t\telements = { %s }\n", strings.Join(elems, ", "))
		}
		b.WriteString("\t}\n")
	}
	vmap := func(name, key, comment string) {
		fmt.Fprintf(&b, "\tmap %s {\n\t\ttype %s : verdict\n\t\tcomment %q\n\t}\n", name, key, comment)
	}
	set(SetClusterIPs, "Active ClusterIPs", nil)
	if len(l.NodePortIPs) > 0 {
		var ips []string
		for _, a := range l.NodePortIPs {
			if !a.IsLoopback() {
				ips = append(ips, a.String())
			}
		}
		set(SetNodePortIPs, "IPs that accept NodePort traffic", ips)
	}
	full := addrType + " . inet_proto . inet_service"
	vmap(MapNoEndpointServices, full, noEndpointsMapComment)
	vmap(MapNoEndpointNodePorts, "inet_proto . inet_service", noEndpointsNPMapComment)
	vmap(MapFirewallIPs, full, "destinations that are subject to LoadBalancerSourceRanges")
	vmap(MapServiceIPs, full, "ClusterIP, ExternalIP and LoadBalancer IP traffic")
	vmap(MapServiceNodePorts, "inet_proto . inet_service", "NodePort traffic")
	// Regular chains first, so that every jump finds its target declared.
	for _, c := range []string{ChainServices, ChainServiceEndpointsCheck, ChainNodePortEndpointsChk, ChainFirewallCheck,
		ChainClusterIPsCheck, ChainMasquerading, ChainMarkForMasquerade, ChainReject} {
		fmt.Fprintf(&b, "\tchain %s {\n", c)
		if c == ChainReject {
			fmt.Fprintf(&b, "\t\tcomment %q\n", "helper for @no-endpoint-services / @no-endpoint-nodeports")
		}
		for _, r := range rules[c] {
			fmt.Fprintf(&b, "\t\t%s\n", r)
		}
		b.WriteString("\t}\n")
	}
	for _, c := range baseChains {
		fmt.Fprintf(&b, "\tchain %s {\n\t\ttype %s hook %s priority %s; policy accept;\n", c.name, c.typ, c.hook, c.priority)
		for _, r := range rules[c.name] {
			fmt.Fprintf(&b, "\t\t%s\n", r)
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}
