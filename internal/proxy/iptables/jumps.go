package iptables

import utiliptables "github.com/svcnet/svcnet/internal/iptables"

// JumpRule is the library's: a rule in a built-in chain to one of ours.
type JumpRule = utiliptables.JumpRule

// ChainCanary is an empty chain in every table we use. Its disappearance
// means someone flushed the tables (a firewall reload, say), and that the
// next sync must be full. kube-proxy uses the same name.
const ChainCanary = "KUBE-PROXY-CANARY"

// canaryTables are where the canary lives.
var canaryTables = []string{"mangle", "nat", "filter"}

var ctNew = []string{"-m", "conntrack", "--ctstate", "NEW"}

// JumpRules returns kube-proxy's jump rules, in the order kube-proxy
// ensures them (each is inserted at the top of its chain).
func JumpRules(cfg Config) []JumpRule {
	cfg = cfg.withDefaults()
	rules := []JumpRule{
		jump("filter", "INPUT", ChainExternalServices, ctNew, "kubernetes externally-visible service portals"),
		jump("filter", "FORWARD", ChainExternalServices, ctNew, "kubernetes externally-visible service portals"),
		jump("filter", "INPUT", ChainNodePorts, nil, "kubernetes health check service ports"),
		jump("filter", "FORWARD", ChainServices, ctNew, "kubernetes service portals"),
		jump("filter", "OUTPUT", ChainServices, ctNew, "kubernetes service portals"),
		jump("filter", "FORWARD", ChainForward, nil, "kubernetes forwarding rules"),
		jump("filter", "INPUT", ChainProxyFirewall, ctNew, "kubernetes load balancer firewall"),
		jump("filter", "OUTPUT", ChainProxyFirewall, ctNew, "kubernetes load balancer firewall"),
		jump("filter", "FORWARD", ChainProxyFirewall, ctNew, "kubernetes load balancer firewall"),
		jump("nat", "OUTPUT", ChainServices, nil, "kubernetes service portals"),
		jump("nat", "PREROUTING", ChainServices, nil, "kubernetes service portals"),
		jump("nat", "POSTROUTING", ChainPostrouting, nil, "kubernetes postrouting rules"),
	}
	if cfg.LocalhostNodePorts {
		rules = append(rules,
			jump("filter", "INPUT", ChainKubeletFirewall, nil, ""),
			jump("filter", "OUTPUT", ChainKubeletFirewall, nil, ""))
	}
	return rules
}

func jump(table, chain, target string, extra []string, comment string) JumpRule {
	return JumpRule{Table: table, Chain: chain, Target: target, Extra: extra, Comment: comment}
}
