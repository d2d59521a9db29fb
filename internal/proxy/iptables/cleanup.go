package iptables

import (
	"context"
	"errors"
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

// Cleanup removes every rule and chain of the iptables mode: what
// `svcnet proxy --cleanup` does, and what another mode does when it
// starts where this one ran.
func Cleanup(ctx context.Context, ex utiliptables.Executor) error {
	var failed []error
	for _, localhost := range []bool{false, true} {
		for _, j := range JumpRules(Config{LocalhostNodePorts: localhost}) {
			if err := ex.DeleteRule(ctx, j.Table, j.Chain, j.Args()...); err != nil {
				failed = append(failed, err)
			}
		}
	}
	for _, table := range []string{"nat", "filter", "mangle"} {
		owned := func(c string) bool {
			return slices.Contains(fixedChains[table], c) || (table == "nat" && IsServiceChain(c))
		}
		if err := utiliptables.DeleteChains(ctx, ex, table, owned); err != nil {
			failed = append(failed, err)
		}
	}
	return errors.Join(failed...)
}
