package iptables

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// fragment is everything one service port contributes to the rule set.
// Rules in the top-level chains are rewritten by every sync (those chains
// are flushed and refilled); the port's own chains are written only when
// the port changed.
type fragment struct {
	name svcstate.ServicePortName

	natServices    []string // -A KUBE-SERVICES …
	natNodePorts   []string // -A KUBE-NODEPORTS …
	filterServices []string // -A KUBE-SERVICES … REJECT/DROP
	filterExternal []string // -A KUBE-EXTERNAL-SERVICES …
	filterNodePort []string // -A KUBE-NODEPORTS … health check ACCEPT
	filterFirewall []string // -A KUBE-PROXY-FIREWALL …

	chains []string // the port's own nat chains, in the order declared
	rules  []string // their rules

	endpoints       int // endpoints of the family, for large-cluster mode
	reachable       int // endpoints rules may send to
	noLocalInternal bool
	noLocalExternal bool
}

// changedChains returns f narrowed to the chains whose rules differ from
// old's (all of f when old is nil), or nil when none does.
func (f *fragment) changedChains(old *fragment) *fragment {
	if old == nil {
		return f
	}
	before, after := old.rulesByChain(), f.rulesByChain()
	n := &fragment{name: f.name}
	for _, c := range f.chains {
		if o, ok := before[c]; ok && slices.Equal(o, after[c]) {
			continue
		}
		n.chains = append(n.chains, c)
		n.rules = append(n.rules, after[c]...)
	}
	if len(n.chains) == 0 {
		return nil
	}
	return n
}

// rulesByChain maps each of f's chains, empty ones included, to its rules.
func (f *fragment) rulesByChain() map[string][]string {
	m := make(map[string][]string, len(f.chains))
	for _, c := range f.chains {
		m[c] = []string{}
	}
	for _, r := range f.rules {
		c, _, _ := strings.Cut(strings.TrimPrefix(r, "-A "), " ")
		m[c] = append(m[c], r)
	}
	return m
}

func (f *fragment) topRules() int {
	return len(f.natServices) + len(f.natNodePorts)
}

func (f *fragment) filterRules() int {
	return len(f.filterServices) + len(f.filterExternal) + len(f.filterNodePort) + len(f.filterFirewall)
}

// line joins the words of one rule.
func line(words ...string) string { return strings.Join(words, " ") }

// quote makes an iptables-restore comment argument.
func quote(s string) string { return `"` + s + `"` }

func probability(n int) string { return fmt.Sprintf("%0.10f", 1.0/float64(n)) }

// render computes a service port's fragment, or nil when the port is not
// proxied in cfg.Family. sp must be the family view and eps the family's
// endpoints. It mirrors kube-proxy's syncProxyRules, service by service.
func render(cfg *Config, sp *svcstate.ServicePort, eps []svcstate.Endpoint, largeCluster bool) *fragment {
	clusterIP := sp.ClusterIP(cfg.Family)
	if !clusterIP.IsValid() {
		return nil
	}
	name := sp.Name.String()
	proto := strings.ToLower(string(sp.Protocol))
	chains := ChainsFor(sp.Name)
	sel := proxy.Select(sp, eps, cfg.Node)
	f := &fragment{name: sp.Name, endpoints: len(eps), reachable: len(sel.Reachable)}
	port := strconv.Itoa(sp.Port)
	match := func(dst netip.Addr, dport string) string {
		return line("-m", proto, "-p", proto, "-d", dst.String(), "--dport", dport)
	}

	hasEndpoints := sel.HasAny
	usesClusterChain := len(sel.Cluster) > 0 && sp.UsesClusterEndpoints()
	usesLocalChain := len(sel.Local) > 0 && sp.UsesLocalEndpoints()

	internalChain, hasInternal := chains.Cluster, hasEndpoints
	if sp.InternalPolicyLocal {
		internalChain = chains.Local
		hasInternal = hasInternal && len(sel.Local) > 0
	}
	externalPolicyChain, hasExternal := chains.Cluster, hasEndpoints
	if sp.ExternalPolicyLocal {
		externalPolicyChain = chains.Local
		hasExternal = hasExternal && len(sel.Local) > 0
	}
	// The EXT chain exists whenever anything may be reached, even if not
	// from outside: it short-circuits traffic from pods and the node.
	usesExternalChain := hasEndpoints && sp.ExternallyAccessible()
	lbChain := chains.External
	// A restriction whose ranges were all unusable keeps its FW chain,
	// which then admits nobody: fail closed, not open.
	usesFWChain := hasEndpoints && len(sp.LoadBalancerIPs) > 0 && (len(sp.LoadBalancerSourceRanges) > 0 || sp.SourceRangesSet)
	if usesFWChain {
		lbChain = chains.Firewall
	}

	var internalTarget, internalComment, externalTarget, externalComment string
	if !hasEndpoints {
		internalTarget, externalTarget = "REJECT", "REJECT"
		internalComment = quote(name + " has no endpoints")
		externalComment = internalComment
	} else {
		if !hasInternal {
			internalTarget, internalComment = "DROP", quote(name+" has no local endpoints")
			f.noLocalInternal = true
		}
		if !hasExternal {
			externalTarget, externalComment = "DROP", quote(name+" has no local endpoints")
			f.noLocalExternal = sp.ExternallyAccessible()
		}
	}

	// Capture the cluster IP.
	if hasInternal {
		f.natServices = append(f.natServices, line("-A", ChainServices, "-m comment --comment", quote(name+" cluster IP"),
			match(clusterIP, port), "-j", internalChain))
	} else {
		f.filterServices = append(f.filterServices, line("-A", ChainServices, "-m comment --comment", internalComment,
			match(clusterIP, port), "-j", internalTarget))
	}

	// Capture external IPs.
	for _, ip := range sp.ExternalIPs {
		if hasEndpoints {
			f.natServices = append(f.natServices, line("-A", ChainServices, "-m comment --comment", quote(name+" external IP"),
				match(ip, port), "-j", chains.External))
		}
		if !hasExternal {
			// No endpoints at all (REJECT), or none for external traffic:
			// DROP what the EXT chain did not short-circuit.
			f.filterExternal = append(f.filterExternal, line("-A", ChainExternalServices, "-m comment --comment", externalComment,
				match(ip, port), "-j", externalTarget))
		}
	}

	// Capture load-balancer IPs.
	for _, ip := range sp.LoadBalancerIPs {
		if hasEndpoints {
			f.natServices = append(f.natServices, line("-A", ChainServices, "-m comment --comment", quote(name+" loadbalancer IP"),
				match(ip, port), "-j", lbChain))
		}
		if usesFWChain {
			f.filterFirewall = append(f.filterFirewall, line("-A", ChainProxyFirewall, "-m comment --comment",
				quote(name+" traffic not accepted by "+chains.Firewall), match(ip, port), "-j DROP"))
		}
	}
	if !hasExternal {
		for _, ip := range sp.LoadBalancerIPs {
			f.filterExternal = append(f.filterExternal, line("-A", ChainExternalServices, "-m comment --comment", externalComment,
				match(ip, port), "-j", externalTarget))
		}
	}

	// Capture node ports. They are not subject to loadBalancerSourceRanges:
	// kube-proxy never applied them there, and clusters rely on that.
	if sp.NodePort != 0 {
		nodePort := strconv.Itoa(sp.NodePort)
		if hasEndpoints {
			f.natNodePorts = append(f.natNodePorts, line("-A", ChainNodePorts, "-m comment --comment", name,
				"-m", proto, "-p", proto, "--dport", nodePort, "-j", chains.External))
		}
		if !hasExternal {
			f.filterExternal = append(f.filterExternal, line("-A", ChainExternalServices, "-m comment --comment", externalComment,
				"-m addrtype --dst-type LOCAL", "-m", proto, "-p", proto, "--dport", nodePort, "-j", externalTarget))
		}
	}
	if sp.HealthCheckNodePort != 0 {
		// Whether or not there are local endpoints: the health check must
		// be able to answer "no".
		f.filterNodePort = append(f.filterNodePort, line("-A", ChainNodePorts, "-m comment --comment",
			quote(name+" health check node port"), "-m tcp -p tcp --dport", strconv.Itoa(sp.HealthCheckNodePort), "-j ACCEPT"))
	}

	// From here on: the port's own chains.
	markMasq := "-j " + ChainMarkMasq
	if hasInternal {
		args := line("-m comment --comment", quote(name+" cluster IP"), match(clusterIP, port))
		switch {
		case cfg.MasqueradeAll:
			f.rules = append(f.rules, line("-A", internalChain, args, markMasq))
		case cfg.ClusterCIDR.IsValid():
			// Off-cluster clients may route the service range to any
			// node; the chosen endpoint may be on another node, so the
			// reply must come back through this one.
			f.rules = append(f.rules, line("-A", internalChain, args, "!", "-s", cfg.ClusterCIDR.String(), markMasq))
		}
	}

	if usesExternalChain {
		f.chains = append(f.chains, chains.External)
		if !sp.ExternalPolicyLocal {
			// Cluster policy may pick an endpoint on another node.
			f.rules = append(f.rules, line("-A", chains.External, "-m comment --comment",
				quote("masquerade traffic for "+name+" external destinations"), markMasq))
		} else {
			if cfg.ClusterCIDR.IsValid() {
				// Pods reaching an external address behave as if they had
				// gone out to the load balancer and come back: neither
				// policy applies.
				f.rules = append(f.rules, line("-A", chains.External, "-m comment --comment",
					quote("pod traffic for "+name+" external destinations"), "-s", cfg.ClusterCIDR.String(), "-j", chains.Cluster))
			}
			// The node itself has the external address as source, so it
			// must be masqueraded, and it may use any endpoint.
			f.rules = append(f.rules, line("-A", chains.External, "-m comment --comment",
				quote("masquerade LOCAL traffic for "+name+" external destinations"), "-m addrtype --src-type LOCAL", markMasq))
			f.rules = append(f.rules, line("-A", chains.External, "-m comment --comment",
				quote("route LOCAL traffic for "+name+" external destinations"), "-m addrtype --src-type LOCAL", "-j", chains.Cluster))
		}
		if hasExternal {
			f.rules = append(f.rules, line("-A", chains.External, "-j", externalPolicyChain))
		}
	}

	if usesFWChain {
		f.chains = append(f.chains, chains.Firewall)
		args := line("-A", chains.Firewall, "-m comment --comment", quote(name+" loadbalancer IP"))
		allowFromNode := false
		for _, r := range sp.LoadBalancerSourceRanges {
			f.rules = append(f.rules, line(args, "-s", r.String(), "-j", chains.External))
			allowFromNode = allowFromNode || slices.ContainsFunc(cfg.NodeIPs, r.Contains)
		}
		// A VIP-like load balancer often puts its IP on the node; a
		// request from the node then arrives with the VIP as source.
		if allowFromNode {
			for _, ip := range sp.LoadBalancerIPs {
				f.rules = append(f.rules, line(args, "-s", ip.String(), "-j", chains.External))
			}
		}
		// What falls off the end was not DNATed, so KUBE-PROXY-FIREWALL
		// in the filter table drops it.
		f.rules = append(f.rules, line("-A", chains.Firewall, "-m comment --comment",
			quote("other traffic to "+name+" will be dropped by KUBE-PROXY-FIREWALL")))
	}

	if usesClusterChain {
		f.chains = append(f.chains, chains.Cluster)
		f.rules = appendBalancing(f.rules, sp, name, chains.Cluster, sel.Cluster, largeCluster)
	}
	if usesLocalChain {
		f.chains = append(f.chains, chains.Local)
		f.rules = appendBalancing(f.rules, sp, name, chains.Local, sel.Local, largeCluster)
	}

	for _, ep := range sel.Reachable {
		epStr := ep.String()
		sep := EndpointChain(sp.Name, epStr)
		f.chains = append(f.chains, sep)
		head := "-A " + sep
		if !largeCluster {
			head = line(head, "-m comment --comment", name)
		}
		// Hairpin: a pod reaching itself through the service would get a
		// reply from its own address and drop it, unless masqueraded.
		f.rules = append(f.rules, line(head, "-s", ep.IP.String(), markMasq))
		if sp.SessionAffinityClientIP {
			head = line(head, "-m recent --name", sep, "--set")
		}
		f.rules = append(f.rules, line(head, "-m", proto, "-p", proto, "-j DNAT --to-destination", epStr))
	}
	// The internal chain's masquerade rule was written before the EXT and
	// FW chains' rules. iptables-restore does not mind, but people reading
	// the rules do: group them by chain, in declaration order.
	f.rules = groupByChain(f.chains, f.rules)
	return f
}

// appendBalancing writes the rules of a KUBE-SVC/KUBE-SVL chain: affinity
// first (a client seen recently returns to its endpoint), then the random
// choice, where rule i of n matches with probability 1/(n-i) so that every
// endpoint gets 1/n, and the last rule catches the rest.
func appendBalancing(rules []string, sp *svcstate.ServicePort, name, chain string, eps []svcstate.Endpoint, largeCluster bool) []string {
	head := func(ep string) string {
		if largeCluster {
			return "-A " + chain
		}
		return line("-A", chain, "-m comment --comment", quote(name+" -> "+ep))
	}
	if sp.SessionAffinityClientIP {
		for _, ep := range eps {
			epStr := ep.String()
			sep := EndpointChain(sp.Name, epStr)
			rules = append(rules, line(head(epStr), "-m recent --name", sep,
				"--rcheck --seconds", strconv.Itoa(sp.StickyMaxAgeSeconds), "--reap -j", sep))
		}
	}
	for i, ep := range eps {
		epStr := ep.String()
		r := head(epStr)
		if i < len(eps)-1 {
			r = line(r, "-m statistic --mode random --probability", probability(len(eps)-i))
		}
		rules = append(rules, line(r, "-j", EndpointChain(sp.Name, epStr)))
	}
	return rules
}

// groupByChain orders rules by the position of their chain in chains,
// keeping the order within a chain.
func groupByChain(chains, rules []string) []string {
	pos := make(map[string]int, len(chains))
	for i, c := range chains {
		pos[c] = i
	}
	chainOf := func(r string) string {
		r = strings.TrimPrefix(r, "-A ")
		c, _, _ := strings.Cut(r, " ")
		return c
	}
	slices.SortStableFunc(rules, func(a, b string) int { return pos[chainOf(a)] - pos[chainOf(b)] })
	return rules
}
