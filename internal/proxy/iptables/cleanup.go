package iptables

import (
	"context"
	"slices"

	utiliptables "github.com/svcnet/svcnet/internal/iptables"
)

// fixedChains are the iptables mode's chains besides the per-service
// ones, by table. KUBE-FIREWALL is left alone: kubelet owns it too.
var fixedChains = map[string][]string{
	"nat":    {ChainServices, ChainNodePorts, ChainPostrouting, ChainMarkMasq, ChainCanary},
	"filter": {ChainServices, ChainExternalServices, ChainForward, ChainNodePorts, ChainProxyFirewall, ChainCanary},
	"mangle": {ChainCanary},
}

// Owned is everything the iptables mode writes: its jumps (with and
// without the localhost node-port firewall) and chains.
func Owned() *utiliptables.Owned {
	var jumps []JumpRule
	for _, localhost := range []bool{false, true} {
		jumps = append(jumps, JumpRules(Config{LocalhostNodePorts: localhost})...)
	}
	chains := map[string]func(string) bool{}
	for table, fixed := range fixedChains {
		chains[table] = func(c string) bool { return slices.Contains(fixed, c) || (table == "nat" && IsServiceChain(c)) }
	}
	return &utiliptables.Owned{Jumps: jumps, Chains: chains}
}

// Cleanup removes every rule and chain of the iptables mode: what
// `svcnet proxy --cleanup` does.
func Cleanup(ctx context.Context, ex utiliptables.Executor) error {
	return utiliptables.Remove(ctx, ex, Owned(), nil)
}
