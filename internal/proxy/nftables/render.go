package nftables

import (
	"net/netip"
	"slices"
	"time"

	nft "github.com/svcnet/svcnet/internal/nftables"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// render computes a service port's fragment, or nil when the port is not
// proxied in cfg's family. sp must be the family's view and eps the
// family's endpoints. It follows kube-proxy's nftables syncProxyRules
// port by port.
func render(cfg *Config, sp *svcstate.ServicePort, eps []svcstate.Endpoint) *fragment {
	clusterIP := sp.ClusterIP(cfg.Family)
	if !clusterIP.IsValid() {
		return nil
	}
	proto, err := nft.ParseProto(string(sp.Protocol))
	if err != nil {
		return nil // svcstate admits TCP, UDP and SCTP only
	}
	name := sp.Name.String()
	base := ServicePortBase(sp.Name)
	clusterChain, localChain := PrefixService+base, PrefixLocal+base
	externalChain, firewallChain := PrefixExternal+base, PrefixFirewall+base
	sel := proxy.Select(sp, eps, cfg.Node)
	f := &fragment{name: sp.Name, reachable: len(sel.Reachable)}
	key := func(a netip.Addr) nft.Key { return nft.Key{Addr: a, Proto: proto, Port: uint16(sp.Port)} }
	elem := func(set string, k nft.Key, v nft.Verdict, comment string) {
		f.elems = append(f.elems, elemRef{set, nft.Element{Key: k, Verdict: v, Comment: comment}})
	}

	hasEndpoints := sel.HasAny
	usesClusterChain := len(sel.Cluster) > 0 && sp.UsesClusterEndpoints()
	usesLocalChain := len(sel.Local) > 0 && sp.UsesLocalEndpoints()
	internalChain, hasInternal := clusterChain, hasEndpoints
	if sp.InternalPolicyLocal {
		internalChain, hasInternal = localChain, hasEndpoints && len(sel.Local) > 0
	}
	externalPolicyChain, hasExternal := clusterChain, hasEndpoints
	if sp.ExternalPolicyLocal {
		externalPolicyChain, hasExternal = localChain, hasEndpoints && len(sel.Local) > 0
	}
	// The external chain exists whenever anything may be reached, even if
	// not from outside: it short-circuits traffic from pods and the node.
	usesExternalChain := hasEndpoints && sp.ExternallyAccessible()
	// A restriction whose ranges were all unusable keeps its firewall
	// chain, which then admits nobody: fail closed, not open.
	usesFirewallChain := len(sp.LoadBalancerIPs) > 0 && (len(sp.LoadBalancerSourceRanges) > 0 || sp.SourceRangesSet)

	var internalFilter, externalFilter nft.Verdict
	if !hasEndpoints {
		internalFilter, externalFilter = gotoChain(ChainReject), gotoChain(ChainReject)
	} else {
		if !hasInternal {
			internalFilter = nft.Verdict{Kind: nft.Drop}
			f.noLocalInternal = true
		}
		if !hasExternal {
			externalFilter = nft.Verdict{Kind: nft.Drop}
			f.noLocalExternal = sp.ExternallyAccessible()
		}
	}

	// The cluster IP.
	elem(SetClusterIPs, nft.Key{Addr: clusterIP}, nft.Verdict{}, "")
	if hasInternal {
		elem(MapServiceIPs, key(clusterIP), gotoChain(internalChain), "")
	} else {
		elem(MapNoEndpointServices, key(clusterIP), internalFilter, name)
	}
	// External IPs.
	for _, ip := range sp.ExternalIPs {
		if hasEndpoints {
			elem(MapServiceIPs, key(ip), gotoChain(externalChain), "")
		}
		if !hasExternal {
			// No endpoints at all (reject), or none for external traffic:
			// drop what the external chain did not short-circuit.
			elem(MapNoEndpointServices, key(ip), externalFilter, name)
		}
	}
	// Load-balancer IPs.
	for _, ip := range sp.LoadBalancerIPs {
		if hasEndpoints {
			elem(MapServiceIPs, key(ip), gotoChain(externalChain), "")
		}
		if usesFirewallChain {
			elem(MapFirewallIPs, key(ip), gotoChain(firewallChain), "")
		}
		if !hasExternal {
			elem(MapNoEndpointServices, key(ip), externalFilter, name)
		}
	}
	// Node ports: not subject to loadBalancerSourceRanges, as in
	// kube-proxy.
	if sp.NodePort != 0 {
		np := nft.Key{Proto: proto, Port: uint16(sp.NodePort)}
		if hasEndpoints {
			elem(MapServiceNodePorts, np, gotoChain(externalChain), "")
		}
		if !hasExternal {
			elem(MapNoEndpointNodePorts, np, externalFilter, name)
		}
	}

	// Local endpoints reaching themselves through the Service are
	// masqueraded (the masquerading chain matches this set).
	for _, ep := range sel.Reachable {
		if ep.IsLocal {
			f.elems = append(f.elems, elemRef{SetHairpinConnections, nft.Element{Key: nft.Key{Addr: ep.IP, Addr2: ep.IP, Proto: proto, Port: uint16(ep.Port)}}})
		}
	}

	// The port's own chains. Their rules go into rules[chain], and the
	// chains are declared in kube-proxy's order below.
	rules := map[string][]nft.Rule{}
	add := func(chain string, r nft.Rule) { rules[chain] = append(rules[chain], r) }
	markMasq := nft.SetMark{Mark: 1 << cfg.MasqueradeBit}
	if usesExternalChain {
		if !sp.ExternalPolicyLocal {
			// Cluster policy may pick an endpoint on another node.
			add(externalChain, nft.R(markMasq).WithComment("masquerade"))
		} else {
			if cfg.ClusterCIDR.IsValid() {
				// Pods reaching an external address behave as if they had
				// gone out to the load balancer and come back in: neither
				// policy applies.
				add(externalChain, nft.R(nft.MatchAddr{Src: true, Prefix: cfg.ClusterCIDR}, gotoChain(clusterChain)).WithComment("short-circuit pod traffic"))
			}
			// The node itself has the external address as source, so it
			// must be masqueraded, and it may use any endpoint.
			add(externalChain, nft.R(nft.MatchFibLocal{Src: true}, markMasq).WithComment("masquerade local traffic"))
			add(externalChain, nft.R(nft.MatchFibLocal{Src: true}, gotoChain(clusterChain)).WithComment("short-circuit local traffic"))
		}
		if hasExternal {
			add(externalChain, nft.R(gotoChain(externalPolicyChain)))
		}
	}
	if usesFirewallChain {
		sources := slices.Clone(sp.LoadBalancerSourceRanges)
		allowFromNode := false
		for _, r := range sp.LoadBalancerSourceRanges {
			allowFromNode = allowFromNode || slices.ContainsFunc(cfg.NodeIPs, r.Contains)
		}
		// A VIP-like load balancer often puts its IP on the node; a
		// request from the node then arrives with the VIP as source.
		if allowFromNode {
			for _, ip := range sp.LoadBalancerIPs {
				sources = append(sources, host(ip))
			}
		}
		if len(sources) == 0 {
			add(firewallChain, nft.R(nft.Verdict{Kind: nft.Drop}))
		} else {
			add(firewallChain, nft.R(nft.MatchAddrList{Src: true, Neg: true, Prefixes: sources}, nft.Verdict{Kind: nft.Drop}))
		}
	}

	// Load balancing. Without affinity, one rule DNATs to an endpoint
	// drawn from an anonymous data map (a plain DNAT for one endpoint):
	// no chain per endpoint. With ClientIP affinity, each endpoint keeps a
	// chain that records its clients in a dynamic set, tried first; a
	// random draw through a verdict map picks one for a new client.
	var sticky time.Duration
	if sp.SessionAffinityClientIP {
		sticky = time.Duration(sp.StickyMaxAgeSeconds) * time.Second
	}
	epBase := func(ep svcstate.Endpoint) string { return EndpointBase(sp.Name, ep.String()) }
	balance := func(chain string, eps []svcstate.Endpoint) {
		if sticky == 0 {
			if len(eps) == 1 {
				add(chain, nft.R(nft.MatchProto{Proto: proto}, nft.DNAT{To: netip.AddrPortFrom(eps[0].IP, uint16(eps[0].Port))}))
				return
			}
			to := make([]netip.AddrPort, len(eps))
			for i, ep := range eps {
				to[i] = netip.AddrPortFrom(ep.IP, uint16(ep.Port))
			}
			add(chain, nft.R(nft.MatchProto{Proto: proto}, nft.DNATMap{To: to}))
			return
		}
		targets := make([]string, len(eps))
		for i, ep := range eps {
			b := epBase(ep)
			add(chain, nft.R(nft.MatchAddrSet{Src: true, Set: PrefixAffinity + b}, gotoChain(PrefixEndpoint+b)))
			targets[i] = PrefixEndpoint + b
		}
		add(chain, nft.R(nft.Numgen{Targets: targets}))
	}
	if usesClusterChain {
		balance(clusterChain, sel.Cluster)
	}
	if usesLocalChain {
		balance(localChain, sel.Local)
	}

	var order []string
	for _, c := range []struct {
		name string
		used bool
	}{
		{externalChain, usesExternalChain}, {firewallChain, usesFirewallChain},
		{clusterChain, usesClusterChain}, {localChain, usesLocalChain},
	} {
		if c.used {
			order = append(order, c.name)
		}
	}
	if sticky > 0 {
		for _, ep := range sel.Reachable {
			b := epBase(ep)
			chain := PrefixEndpoint + b
			order = append(order, chain)
			add(chain, nft.R(nft.UpdateSrcSet{Set: PrefixAffinity + b}))
			add(chain, nft.R(nft.MatchProto{Proto: proto}, nft.DNAT{To: netip.AddrPortFrom(ep.IP, uint16(ep.Port))}))
			f.affinity = append(f.affinity, &nft.Set{Name: PrefixAffinity + b, Key: nft.KeyAddr, Timeout: sticky})
		}
	}
	for _, c := range order {
		f.chains = append(f.chains, &nft.Chain{Name: c, Rules: rules[c]})
	}
	return f
}

func host(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }
