package nftables

import (
	"net/netip"
	"slices"

	nft "github.com/svcnet/svcnet/internal/nftables"
)

// TableName is kube-proxy's table, in the ip (and ip6) family.
const TableName = "kube-proxy"

// The fixed chains, sets and maps, named as kube-proxy names them so that
// people and tools that know its table find their way in ours.
const (
	ChainFilterPreroutingPreDNAT = "filter-prerouting-pre-dnat"
	ChainFilterOutputPreDNAT     = "filter-output-pre-dnat"
	ChainFilterInput             = "filter-input"
	ChainFilterForward           = "filter-forward"
	ChainFilterOutput            = "filter-output"
	ChainNATPrerouting           = "nat-prerouting"
	ChainNATOutput               = "nat-output"
	ChainNATPostrouting          = "nat-postrouting"

	ChainServices              = "services"
	ChainServiceEndpointsCheck = "service-endpoints-check"
	ChainNodePortEndpointsChk  = "nodeport-endpoints-check"
	ChainFirewallCheck         = "firewall-check"
	ChainClusterIPsCheck       = "cluster-ips-check"
	ChainMasquerading          = "masquerading"
	ChainReject                = "reject-chain"

	SetClusterIPs           = "cluster-ips"
	SetNodePortIPs          = "nodeport-ips"
	SetHairpinConnections   = "hairpin-connections"
	MapNoEndpointServices   = "no-endpoint-services"
	MapNoEndpointNodePorts  = "no-endpoint-nodeports"
	MapFirewallIPs          = "firewall-ips"
	MapServiceIPs           = "service-ips"
	MapServiceNodePorts     = "service-nodeports"
	defaultMasqueradeMark   = 0x4000
	tableComment            = "rules for kube-proxy"
	noEndpointsMapComment   = "vmap to drop or reject packets to services with no endpoints"
	noEndpointsNPMapComment = "vmap to drop or reject packets to service nodeports with no endpoints"
)

// Netfilter's priorities (nft's names): filter chains that must see the
// addresses clients asked for run just before DNAT, the others after it.
const (
	priorityFilter = 0
	priorityDstNAT = -100
	prioritySrcNAT = 100
)

// baseChains are the chains on netfilter hooks, as kube-proxy declares
// them.
var baseChains = []nft.Chain{
	{Name: ChainFilterPreroutingPreDNAT, Hook: &nft.Hook{Type: "filter", Hook: "prerouting", Priority: priorityDstNAT - 10}},
	{Name: ChainFilterOutputPreDNAT, Hook: &nft.Hook{Type: "filter", Hook: "output", Priority: priorityDstNAT - 10}},
	{Name: ChainFilterInput, Hook: &nft.Hook{Type: "filter", Hook: "input", Priority: priorityFilter}},
	{Name: ChainFilterForward, Hook: &nft.Hook{Type: "filter", Hook: "forward", Priority: priorityFilter}},
	{Name: ChainFilterOutput, Hook: &nft.Hook{Type: "filter", Hook: "output", Priority: priorityFilter}},
	{Name: ChainNATPrerouting, Hook: &nft.Hook{Type: "nat", Hook: "prerouting", Priority: priorityDstNAT}},
	{Name: ChainNATOutput, Hook: &nft.Hook{Type: "nat", Hook: "output", Priority: priorityDstNAT}},
	{Name: ChainNATPostrouting, Hook: &nft.Hook{Type: "nat", Hook: "postrouting", Priority: prioritySrcNAT}},
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
	{ChainFilterPreroutingPreDNAT, ChainFirewallCheck, true},
	{ChainFilterOutputPreDNAT, ChainFirewallCheck, true},
	{ChainNATOutput, ChainServices, false},
	{ChainNATPrerouting, ChainServices, false},
	{ChainNATPostrouting, ChainMasquerading, false},
	{ChainFilterForward, ChainClusterIPsCheck, true},
	{ChainFilterOutput, ChainClusterIPsCheck, true},
}

// fixedRegular are the fixed chains that no hook calls, in the order they
// are declared.
var fixedRegular = []string{ChainServices, ChainServiceEndpointsCheck, ChainNodePortEndpointsChk, ChainFirewallCheck,
	ChainClusterIPsCheck, ChainMasquerading, ChainReject}

// IsFixedChain tells the chains every table has from the per-service ones.
func IsFixedChain(name string) bool {
	return slices.Contains(fixedRegular, name) || slices.ContainsFunc(baseChains, func(c nft.Chain) bool { return c.Name == name })
}

// Layout is what the fixed part of the table depends on.
type Layout struct {
	IPv6 bool
	// MasqueradeMark is the packet mark bit for masquerading (kube-proxy's
	// 0x4000 when zero).
	MasqueradeMark uint32
	// ServiceCIDRs: traffic to unallocated addresses in them is dropped.
	ServiceCIDRs []netip.Prefix
	// NodePortIPs accept NodePort traffic; none means every local address
	// but loopback (kube-proxy's --nodeport-addresses unset).
	NodePortIPs []netip.Addr
	// ClusterCIDR is the pod network: traffic to a cluster IP from
	// outside it is masqueraded, as kube-proxy's local-traffic detector
	// by cluster CIDR does. Ignored with MasqueradeAll.
	ClusterCIDR netip.Prefix
	// MasqueradeAll masquerades all traffic to cluster IPs.
	MasqueradeAll bool
}

func (l Layout) family() nft.Family {
	if l.IPv6 {
		return nft.IPv6
	}
	return nft.IPv4
}

// Fixed returns the table with its fixed sets, maps and chains (the
// per-service chains and the map and set elements are added to it by the
// syncs), and the elements of nodeport-ips.
func (l Layout) Fixed() *nft.Table {
	mark := l.MasqueradeMark
	if mark == 0 {
		mark = defaultMasqueradeMark
	}
	loopback := netip.MustParsePrefix("127.0.0.0/8")
	if l.IPv6 {
		loopback = netip.MustParsePrefix("::1/128")
	}
	rules := map[string][]nft.Rule{}
	add := func(chain string, r nft.Rule) { rules[chain] = append(rules[chain], r) }
	for _, j := range jumps {
		if j.newOnly {
			add(j.from, nft.R(nft.MatchCtNew{}, jumpTo(j.to)))
		} else {
			add(j.from, nft.R(jumpTo(j.to)))
		}
	}
	// Masquerade what a rule marked (clearing the mark, which must not
	// leak into routing decisions), and a pod's connection to itself
	// through a Service, whose reply would otherwise come from its own
	// address and be dropped.
	add(ChainMasquerading, nft.R(nft.MatchMarkSet{Mark: mark}, nft.SetMark{Xor: true, Mark: mark}, nft.Masquerade{FullyRandom: true}))
	add(ChainMasquerading, nft.R(nft.MatchCtStatusDNAT{}, nft.MatchConnSet{Set: SetHairpinConnections}, nft.Masquerade{FullyRandom: true}))
	add(ChainClusterIPsCheck, nft.R(nft.MatchAddrSet{Set: SetClusterIPs}, nft.Reject{}).WithComment("Reject traffic to invalid ports of ClusterIPs"))
	if len(l.ServiceCIDRs) > 0 {
		// One CIDR is a plain match, as nft writes a one-element list.
		var m nft.Stmt = nft.MatchAddrList{Prefixes: l.ServiceCIDRs}
		if len(l.ServiceCIDRs) == 1 {
			m = nft.MatchAddr{Prefix: l.ServiceCIDRs[0]}
		}
		add(ChainClusterIPsCheck, nft.R(m, nft.Verdict{Kind: nft.Drop}).WithComment("Drop traffic to unallocated ClusterIPs"))
	}
	add(ChainReject, nft.R(nft.Reject{}))
	add(ChainServiceEndpointsCheck, nft.R(nft.VmapLookup{Daddr: true, Map: MapNoEndpointServices}))
	add(ChainFirewallCheck, nft.R(nft.VmapLookup{Daddr: true, Map: MapFirewallIPs}))
	switch {
	case l.MasqueradeAll:
		add(ChainServices, nft.R(nft.MatchAddrSet{Set: SetClusterIPs}, nft.SetMark{Mark: mark}).WithComment("masquerade all clusterIP traffic"))
	case l.ClusterCIDR.IsValid():
		// Off-cluster clients may route the service range to any node;
		// the chosen endpoint may be on another node, so the reply must
		// come back through this one.
		add(ChainServices, nft.R(nft.MatchAddrSet{Set: SetClusterIPs}, nft.MatchAddr{Src: true, Neg: true, Prefix: l.ClusterCIDR},
			nft.SetMark{Mark: mark}).WithComment("masquerade clusterIP traffic from outside cluster"))
	}
	add(ChainServices, nft.R(nft.VmapLookup{Daddr: true, Map: MapServiceIPs}))
	if len(l.NodePortIPs) == 0 {
		noLocalhost := nft.MatchAddr{Neg: true, Prefix: loopback}
		add(ChainNodePortEndpointsChk, nft.R(noLocalhost, nft.VmapLookup{Map: MapNoEndpointNodePorts}))
		add(ChainServices, nft.R(nft.MatchFibLocal{}, noLocalhost, nft.VmapLookup{Map: MapServiceNodePorts}))
	} else {
		add(ChainNodePortEndpointsChk, nft.R(nft.MatchAddrSet{Set: SetNodePortIPs}, nft.VmapLookup{Map: MapNoEndpointNodePorts}))
		add(ChainServices, nft.R(nft.MatchAddrSet{Set: SetNodePortIPs}, nft.VmapLookup{Map: MapServiceNodePorts}))
	}

	t := &nft.Table{Family: l.family(), Name: TableName, Comment: tableComment, Elements: map[string][]nft.Element{}}
	t.Sets = append(t.Sets, &nft.Set{Name: SetHairpinConnections, Key: nft.KeyConn, Comment: "service hairpin connections"},
		&nft.Set{Name: SetClusterIPs, Key: nft.KeyAddr, Comment: "Active ClusterIPs"})
	if len(l.NodePortIPs) > 0 {
		t.Sets = append(t.Sets, &nft.Set{Name: SetNodePortIPs, Key: nft.KeyAddr, Comment: "IPs that accept NodePort traffic"})
		for _, a := range l.NodePortIPs {
			if !a.IsLoopback() {
				t.Elements[SetNodePortIPs] = append(t.Elements[SetNodePortIPs], nft.Element{Key: nft.Key{Addr: a}})
			}
		}
	}
	t.Sets = append(t.Sets,
		&nft.Set{Name: MapNoEndpointServices, Key: nft.KeyAddrProtoPort, Verdicts: true, Comment: noEndpointsMapComment},
		&nft.Set{Name: MapNoEndpointNodePorts, Key: nft.KeyProtoPort, Verdicts: true, Comment: noEndpointsNPMapComment},
		&nft.Set{Name: MapFirewallIPs, Key: nft.KeyAddrProtoPort, Verdicts: true, Comment: "destinations that are subject to LoadBalancerSourceRanges"},
		&nft.Set{Name: MapServiceIPs, Key: nft.KeyAddrProtoPort, Verdicts: true, Comment: "ClusterIP, ExternalIP and LoadBalancer IP traffic"},
		&nft.Set{Name: MapServiceNodePorts, Key: nft.KeyProtoPort, Verdicts: true, Comment: "NodePort traffic"},
	)
	// Regular chains first, so that every jump finds its target declared.
	for _, c := range fixedRegular {
		ch := &nft.Chain{Name: c, Rules: rules[c]}
		if c == ChainReject {
			ch.Comment = "helper for @no-endpoint-services / @no-endpoint-nodeports"
		}
		t.Chains = append(t.Chains, ch)
	}
	for _, c := range baseChains {
		t.Chains = append(t.Chains, &nft.Chain{Name: c.Name, Hook: c.Hook, Rules: rules[c.Name]})
	}
	return t
}

func jumpTo(chain string) nft.Verdict    { return nft.Verdict{Kind: nft.Jump, Chain: chain} }
func gotoChain(chain string) nft.Verdict { return nft.Verdict{Kind: nft.Goto, Chain: chain} }
