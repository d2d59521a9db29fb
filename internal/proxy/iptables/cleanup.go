package iptables

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
func Cleanup(ctx context.Context, ex Executor) error {
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
		if err := DeleteChains(ctx, ex, table, owned); err != nil {
			failed = append(failed, err)
		}
	}
	return errors.Join(failed...)
}

// DeleteChains flushes and deletes, in one restore, the chains of table
// that owned says are ours. Rules elsewhere that jump to them must be gone
// already.
func DeleteChains(ctx context.Context, ex Executor, table string, owned func(string) bool) error {
	data, err := ex.Save(ctx, table)
	if err != nil {
		return fmt.Errorf("list %s chains: %w", table, err)
	}
	var chains []string
	for _, c := range chainsIn(data) {
		if owned(c) {
			chains = append(chains, c)
		}
	}
	if len(chains) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("*" + table + "\n")
	for _, c := range chains {
		b.WriteString(":" + c + " - [0:0]\n")
	}
	for _, c := range chains {
		b.WriteString("-X " + c + "\n")
	}
	b.WriteString("COMMIT\n")
	if err := ex.Restore(ctx, []byte(b.String())); err != nil {
		return fmt.Errorf("delete %d %s chains: %w", len(chains), table, err)
	}
	return nil
}
