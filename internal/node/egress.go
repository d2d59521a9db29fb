package node

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
)

// egressChain is the node agent's own nat chain.
const egressChain = "SVCNET-POD-EGRESS"

// podEgress masquerades traffic from this node's pods to destinations
// outside the cluster's pod network, as CNI plugins do (kindnet, the
// bridge plugin's ipMasq), so pods reach the hosts around the cluster and
// their replies find the way back. It programs the node's namespace only
// (the agent runs in it).
func podEgress(podCIDR, clusterCIDR netip.Prefix) error {
	run := func(args ...string) error {
		out, err := exec.Command("iptables", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	_ = run("-t", "nat", "-N", egressChain) // exists already: fine
	if run("-t", "nat", "-C", "POSTROUTING", "-j", egressChain) != nil {
		if err := run("-t", "nat", "-A", "POSTROUTING", "-m", "comment", "--comment", "svcnet pod egress", "-j", egressChain); err != nil {
			return err
		}
	}
	if err := run("-t", "nat", "-F", egressChain); err != nil {
		return err
	}
	return run("-t", "nat", "-A", egressChain, "-s", podCIDR.String(), "!", "-d", clusterCIDR.String(),
		"-m", "comment", "--comment", "pods to outside the cluster's pod network", "-j", "MASQUERADE")
}
