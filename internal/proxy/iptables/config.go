package iptables

import (
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/proxy"
)

// Config is what the rule set depends on besides the snapshot: facts about
// the node and kube-proxy's iptables flags.
type Config struct {
	// Family is the IP family programmed (iptables or ip6tables). Default
	// IPv4.
	Family v1.IPFamily
	// Node is the node the rules are for; its name decides which endpoints
	// are local and, with its zone, which topology hints apply.
	Node proxy.Node
	// NodeIPs are the node's addresses of Family. A loadBalancerSourceRange
	// that contains one lets the node reach its own load-balancer IP.
	NodeIPs []netip.Addr
	// ClusterCIDR is the pod network of Family (--cluster-cidr). Traffic
	// from it is "local": not masqueraded to cluster IPs, and
	// short-circuited for Local external policy. Zero: no detection.
	ClusterCIDR netip.Prefix
	// MasqueradeBit is the bit of the packet mark that asks for SNAT.
	// Default 14 (0x4000).
	MasqueradeBit int
	// MasqueradeAll masquerades all traffic to cluster IPs.
	MasqueradeAll bool
	// NodePortAddresses limits node ports to these addresses; empty means
	// every local address.
	NodePortAddresses []netip.Addr
	// LocalhostNodePorts accepts node ports on 127.0.0.0/8 (IPv4 only; the
	// applier must then set route_localnet).
	LocalhostNodePorts bool
	// ConntrackTCPLiberal says nf_conntrack_tcp_be_liberal is set, in which
	// case INVALID packets are not dropped.
	ConntrackTCPLiberal bool
	// RandomFully adds --random-fully to MASQUERADE.
	RandomFully bool
	// LargeClusterEndpoints is the endpoint count above which per-endpoint
	// comments are left out to shrink the rules, as kube-proxy does.
	// Default 1000; negative: never.
	LargeClusterEndpoints int
}

func (c Config) withDefaults() Config {
	if c.Family == "" {
		c.Family = v1.IPv4Protocol
	}
	if c.MasqueradeBit == 0 {
		c.MasqueradeBit = 14
	}
	if c.LargeClusterEndpoints == 0 {
		c.LargeClusterEndpoints = 1000
	}
	if c.Family == v1.IPv6Protocol {
		c.LocalhostNodePorts = false // the kernel cannot route ::1 off-host
	}
	return c
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.Family != v1.IPv4Protocol && c.Family != v1.IPv6Protocol {
		return fmt.Errorf("iptables: unknown IP family %q", c.Family)
	}
	if c.MasqueradeBit < 0 || c.MasqueradeBit > 31 {
		return fmt.Errorf("iptables: masquerade bit %d not in 0..31", c.MasqueradeBit)
	}
	if c.ClusterCIDR.IsValid() && family(c.ClusterCIDR.Addr()) != c.Family {
		return fmt.Errorf("iptables: cluster CIDR %s is not %s", c.ClusterCIDR, c.Family)
	}
	for _, a := range append(append([]netip.Addr{}, c.NodeIPs...), c.NodePortAddresses...) {
		if family(a) != c.Family {
			return fmt.Errorf("iptables: node address %s is not %s", a, c.Family)
		}
	}
	return nil
}

func (c Config) mark() string { return fmt.Sprintf("%#x", 1<<c.MasqueradeBit) }

func family(a netip.Addr) v1.IPFamily {
	if a.Is4() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}
