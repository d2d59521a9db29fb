package node

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/svcnet/svcnet/internal/iptables"
)

// egressChain is the node agent's own nat chain.
const egressChain = "SVCNET-POD-EGRESS"

// podEgress masquerades traffic from this node's pods to destinations
// outside the cluster's pod network, as CNI plugins do (kindnet, the
// bridge plugin's ipMasq), so pods reach the hosts around the cluster and
// their replies find the way back. It programs the node's namespace only
// (the agent runs in it), through the same iptables (binary, backend,
// lock) as the node's service proxy.
func podEgress(ctx context.Context, ex iptables.Executor, podCIDR, clusterCIDR netip.Prefix) error {
	if err := ex.EnsureChain(ctx, "nat", egressChain); err != nil {
		return err
	}
	if err := ex.EnsureRule(ctx, "nat", "POSTROUTING", "-m", "comment", "--comment", "svcnet pod egress", "-j", egressChain); err != nil {
		return err
	}
	// Declaring the chain in a --noflush restore replaces its rules at once.
	rules := fmt.Sprintf("*nat\n:%s - [0:0]\n-A %s -s %s ! -d %s -m comment --comment \"pods to outside the cluster's pod network\" -j MASQUERADE\nCOMMIT\n",
		egressChain, egressChain, podCIDR, clusterCIDR)
	return ex.Restore(ctx, []byte(rules))
}
