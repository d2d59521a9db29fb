package proxy

import (
	"fmt"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// NodeConfig is what every mode's rules depend on besides the snapshot:
// the node they are for, and the kube-proxy flags that every mode reads.
// A mode's own Config embeds it and adds its own settings.
type NodeConfig struct {
	// Family is the IP family programmed. Default IPv4.
	Family v1.IPFamily
	// Node is the node the rules are for; its name decides which
	// endpoints are local and, with its zone, which topology hints apply.
	Node Node
	// NodeIPs are the node's addresses of Family. A
	// loadBalancerSourceRange that holds one lets the node reach its own
	// load-balancer IP.
	NodeIPs []netip.Addr
	// ClusterCIDR is the pod network of Family (--cluster-cidr): traffic
	// from it is "local" (not masqueraded to cluster IPs, short-circuited
	// for Local external policy). Zero: no detection.
	ClusterCIDR netip.Prefix
	// MasqueradeBit is the bit of the packet mark that asks for SNAT.
	// Default 14 (0x4000).
	MasqueradeBit int
	// MasqueradeAll masquerades all traffic to cluster IPs.
	MasqueradeAll bool
	// NodePortAddresses limits node ports to these addresses; empty means
	// every local address (but loopback, in the kernel modes).
	NodePortAddresses []netip.Addr
}

// WithDefaults fills in the defaults.
func (c NodeConfig) WithDefaults() NodeConfig {
	if c.Family == "" {
		c.Family = v1.IPv4Protocol
	}
	if c.MasqueradeBit == 0 {
		c.MasqueradeBit = 14
	}
	return c
}

// Equal reports whether c and o are the same settings.
func (c NodeConfig) Equal(o NodeConfig) bool {
	return c.Family == o.Family && c.Node == o.Node && slices.Equal(c.NodeIPs, o.NodeIPs) &&
		c.ClusterCIDR == o.ClusterCIDR && c.MasqueradeBit == o.MasqueradeBit && c.MasqueradeAll == o.MasqueradeAll &&
		slices.Equal(c.NodePortAddresses, o.NodePortAddresses)
}

// Validate reports settings that cannot work; mode names the mode in the
// error.
func (c NodeConfig) Validate(mode string) error {
	c = c.WithDefaults()
	if c.Family != v1.IPv4Protocol && c.Family != v1.IPv6Protocol {
		return fmt.Errorf("%s: unknown IP family %q", mode, c.Family)
	}
	if c.MasqueradeBit < 0 || c.MasqueradeBit > 31 {
		return fmt.Errorf("%s: masquerade bit %d not in 0..31", mode, c.MasqueradeBit)
	}
	is6 := c.Family == v1.IPv6Protocol
	if c.ClusterCIDR.IsValid() && c.ClusterCIDR.Addr().Is6() != is6 {
		return fmt.Errorf("%s: cluster CIDR %s is not %s", mode, c.ClusterCIDR, c.Family)
	}
	for _, a := range slices.Concat(c.NodeIPs, c.NodePortAddresses) {
		if a.Is6() != is6 {
			return fmt.Errorf("%s: node address %s is not %s", mode, a, c.Family)
		}
	}
	return nil
}
