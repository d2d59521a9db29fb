package iptables

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/proxy"
)

// Config is what the rule set depends on besides the snapshot: facts about
// the node and kube-proxy's iptables flags.
type Config struct {
	proxy.NodeConfig
	// LocalhostNodePorts accepts node ports on 127.0.0.0/8 (IPv4 only; the
	// applier must then set route_localnet).
	LocalhostNodePorts bool
	// ConntrackTCPLiberal says nf_conntrack_tcp_be_liberal is set, in which
	// case INVALID packets are not dropped.
	ConntrackTCPLiberal bool
	// InvalidCounter names the nfacct counter the INVALID packets dropped
	// are counted in (kube-proxy's ct_state_invalid_dropped_pkts); empty:
	// not counted.
	InvalidCounter string
	// LargeClusterEndpoints is the endpoint count above which per-endpoint
	// comments are left out to shrink the rules, as kube-proxy does.
	// Default 1000; negative: never.
	LargeClusterEndpoints int
}

func (c Config) withDefaults() Config {
	c.NodeConfig = c.NodeConfig.WithDefaults()
	if c.LargeClusterEndpoints == 0 {
		c.LargeClusterEndpoints = 1000
	}
	if c.Family == v1.IPv6Protocol {
		c.LocalhostNodePorts = false // the kernel cannot route ::1 off-host
	}
	return c
}

// Validate reports settings that cannot work.
func (c Config) Validate() error { return c.NodeConfig.Validate("iptables") }

func (c Config) mark() string { return fmt.Sprintf("%#x", 1<<c.MasqueradeBit) }
