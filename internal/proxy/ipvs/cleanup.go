package ipvs

import (
	"context"
	"errors"
	"slices"

	utiliptables "github.com/svcnet/svcnet/internal/iptables"
)

// Cleanup removes the mode's jumps and chains. Chains of the same names
// belong to the iptables mode too (KUBE-SERVICES, KUBE-POSTROUTING …):
// whichever mode starts rewrites them, and each mode's cleanup removes
// them, as kube-proxy's do.
func Cleanup(ctx context.Context, ex utiliptables.Executor) error {
	var errs []error
	for _, j := range JumpRules {
		errs = append(errs, ex.DeleteRule(ctx, j.Table, j.Chain, "-m", "comment", "--comment", j.Comment, "-j", j.Target))
	}
	errs = append(errs,
		utiliptables.DeleteChains(ctx, ex, "nat", func(c string) bool { return slices.Contains(NATChains, c) }),
		utiliptables.DeleteChains(ctx, ex, "filter", func(c string) bool { return slices.Contains(FilterChains, c) }))
	return errors.Join(errs...)
}
