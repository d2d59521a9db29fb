package iptables

// JumpRule links a built-in chain to one of ours. These rules live in
// chains we do not own, so they cannot be part of a --noflush restore
// (declaring PREROUTING would not flush it, and appending would duplicate
// the rule on every sync); they are ensured one by one, on full syncs.
type JumpRule struct {
	Table   string
	Chain   string // built-in chain, e.g. PREROUTING
	Target  string // our chain
	Extra   []string
	Comment string
}

// Args returns the rule's arguments as one passes them to iptables -C/-I.
func (j JumpRule) Args() []string {
	args := append([]string{}, j.Extra...)
	if j.Comment != "" {
		args = append(args, "-m", "comment", "--comment", j.Comment)
	}
	return append(args, "-j", j.Target)
}

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
		{"filter", "INPUT", ChainExternalServices, ctNew, "kubernetes externally-visible service portals"},
		{"filter", "FORWARD", ChainExternalServices, ctNew, "kubernetes externally-visible service portals"},
		{"filter", "INPUT", ChainNodePorts, nil, "kubernetes health check service ports"},
		{"filter", "FORWARD", ChainServices, ctNew, "kubernetes service portals"},
		{"filter", "OUTPUT", ChainServices, ctNew, "kubernetes service portals"},
		{"filter", "FORWARD", ChainForward, nil, "kubernetes forwarding rules"},
		{"filter", "INPUT", ChainProxyFirewall, ctNew, "kubernetes load balancer firewall"},
		{"filter", "OUTPUT", ChainProxyFirewall, ctNew, "kubernetes load balancer firewall"},
		{"filter", "FORWARD", ChainProxyFirewall, ctNew, "kubernetes load balancer firewall"},
		{"nat", "OUTPUT", ChainServices, nil, "kubernetes service portals"},
		{"nat", "PREROUTING", ChainServices, nil, "kubernetes service portals"},
		{"nat", "POSTROUTING", ChainPostrouting, nil, "kubernetes postrouting rules"},
	}
	if cfg.LocalhostNodePorts {
		rules = append(rules,
			JumpRule{"filter", "INPUT", ChainKubeletFirewall, nil, ""},
			JumpRule{"filter", "OUTPUT", ChainKubeletFirewall, nil, ""})
	}
	return rules
}
