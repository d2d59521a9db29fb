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

	// The port's own chains. Their rules go into rules[chain], and the
	// chains are declared in kube-proxy's order below.
	rules := map[string][]nft.Rule{}
	add := func(chain string, r nft.Rule) { rules[chain] = append(rules[chain], r) }
	markMasq := jumpTo(ChainMarkForMasquerade)
	if hasInternal {
		dst := []nft.Stmt{nft.MatchAddr{Prefix: host(clusterIP)}, nft.MatchProto{Proto: proto}, nft.MatchDport{Port: uint16(sp.Port)}}
		switch {
		case cfg.MasqueradeAll:
			add(internalChain, nft.R(append(dst, markMasq)...))
		case cfg.ClusterCIDR.IsValid():
			// Off-cluster clients may route the service range to any
			// node; the chosen endpoint may be on another node, so the
			// reply must come back through this one.
			add(internalChain, nft.R(append(dst, nft.MatchAddr{Src: true, Neg: true, Prefix: cfg.ClusterCIDR}, markMasq)...))
		}
	}
	if usesExternalChain {
		if !sp.ExternalPolicyLocal {
			// Cluster policy may pick an endpoint on another node.
			add(externalChain, nft.R(markMasq))
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

	// Affinity: one dynamic set per endpoint, of the clients it has.
	var sticky time.Duration
	if sp.SessionAffinityClientIP {
		sticky = time.Duration(sp.StickyMaxAgeSeconds) * time.Second
	}
	epBase := func(ep svcstate.Endpoint) string { return EndpointBase(sp.Name, ep.String()) }
	// Load balancing: rule i of n goes to endpoint i one time in n-i, so
	// that each gets 1/n, as iptables' statistic rules do. kube-proxy
	// writes one `numgen random mod n vmap { … }` rule instead; its
	// anonymous map costs the kernel a scan of every set of the table for
	// each of its elements when it is loaded (a loop check), which makes
	// a full sync quadratic in the number of services: minutes at 10,000.
	balance := func(chain string, eps []svcstate.Endpoint) {
		for _, ep := range eps {
			if sticky > 0 {
				b := epBase(ep)
				add(chain, nft.R(nft.MatchAddrSet{Src: true, Set: PrefixAffinity + b}, gotoChain(PrefixEndpoint+b)))
			}
		}
		for i, ep := range eps {
			target := gotoChain(PrefixEndpoint + epBase(ep))
			if left := len(eps) - i; left > 1 {
				add(chain, nft.R(nft.MatchNumgen{Mod: uint32(left)}, target))
			} else {
				add(chain, nft.R(target))
			}
		}
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
	for _, ep := range sel.Reachable {
		b := epBase(ep)
		chain := PrefixEndpoint + b
		order = append(order, chain)
		// Hairpin: a pod reaching itself through the service would get a
		// reply from its own address and drop it, unless masqueraded.
		add(chain, nft.R(nft.MatchAddr{Src: true, Prefix: host(ep.IP)}, markMasq))
		if sticky > 0 {
			add(chain, nft.R(nft.UpdateSrcSet{Set: PrefixAffinity + b}))
			f.affinity = append(f.affinity, &nft.Set{Name: PrefixAffinity + b, Key: nft.KeyAddr, Timeout: sticky})
		}
		add(chain, nft.R(nft.MatchProto{Proto: proto}, nft.DNAT{To: netip.AddrPortFrom(ep.IP, uint16(ep.Port))}))
	}
	for _, c := range order {
		f.chains = append(f.chains, &nft.Chain{Name: c, Rules: rules[c]})
	}
	return f
}

func host(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }
