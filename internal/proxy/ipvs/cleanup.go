package ipvs

import (
	"context"
	"slices"

	utiliptables "github.com/svcnet/svcnet/internal/iptables"
)

// Owned is everything the ipvs mode writes in iptables. Chains of the
// same names belong to the iptables mode too (KUBE-SERVICES,
// KUBE-POSTROUTING …), and some jumps: see utiliptables.Remove.
func Owned() *utiliptables.Owned {
	o := &utiliptables.Owned{Chains: map[string]func(string) bool{
		"nat":    func(c string) bool { return slices.Contains(NATChains, c) },
		"filter": func(c string) bool { return slices.Contains(FilterChains, c) },
	}}
	for _, j := range JumpRules {
		o.Jumps = append(o.Jumps, utiliptables.JumpRule{Table: j.Table, Chain: j.Chain, Target: j.Target, Comment: j.Comment})
	}
	return o
}

// Cleanup removes the mode's jumps and chains, but what keep owns (nil:
// everything).
func Cleanup(ctx context.Context, ex utiliptables.Executor, keep *utiliptables.Owned) error {
	return utiliptables.Remove(ctx, ex, Owned(), keep)
}
