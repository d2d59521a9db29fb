package cluster

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"

	"github.com/svcnet/svcnet/internal/node"
	"github.com/svcnet/svcnet/internal/proxy/app"
)

// ExampleNodePort is the nodePort of the reference scenario
// (examples/hostnames.yaml), which up's hints apply.
const ExampleNodePort = 8477

// Validate refuses, before anything starts, options that cannot make a
// working cluster: a proxy mode that is not built (its proxies would
// crash-loop on every node while the cluster reports ready), a node-port
// range, DNS upstream or registry mirror that does not parse, a bad plan.
func (o Options) Validate() error {
	if _, err := o.plan(); err != nil {
		return err
	}
	if o.ProxyMode != ProxyModeNone {
		if err := app.CheckMode(o.ProxyMode); err != nil {
			return err
		}
		if strings.EqualFold(o.ProxyMode, "ebpf") && NodeCgroup(o.Name, "node-1") == "" {
			return fmt.Errorf("--proxy-mode ebpf: this machine mounts no cgroup v2 hierarchy, to whose groups the mode attaches its programs")
		}
	}
	if _, _, err := ParsePortRange(o.NodePortRange); err != nil {
		return fmt.Errorf("--service-node-port-range: %w", err)
	}
	if o.DNSUpstream != "" && o.DNSUpstream != "none" {
		for _, u := range strings.Split(o.DNSUpstream, ",") {
			if _, err := netip.ParseAddrPort(u); err != nil {
				if _, err := netip.ParseAddr(u); err != nil {
					return fmt.Errorf("--dns-upstream %q: want addresses like 10.0.0.53 or 10.0.0.53:53, comma-separated", u)
				}
			}
		}
	}
	if b := o.IPTablesBinary; b != "" {
		if !strings.HasPrefix(b, "iptables") && !strings.HasPrefix(b, "ip6tables") {
			return fmt.Errorf("--iptables-binary %q: want iptables, iptables-nft or iptables-legacy", b)
		}
		for _, tool := range []string{b, b + "-save", b + "-restore"} {
			if _, err := exec.LookPath(tool); err != nil {
				return fmt.Errorf("--iptables-binary %s: %s is not installed", b, tool)
			}
		}
	}
	if _, err := node.ParseMirrors(o.RegistryMirrors); err != nil {
		return err
	}
	if o.APIPort < 0 || o.APIPort > 65535 {
		return fmt.Errorf("--api-port %d: not a port", o.APIPort)
	}
	return nil
}

// ParsePortRange parses kube-apiserver's "30000-32767" (or one port).
func ParsePortRange(s string) (int, int, error) {
	lo, hi, found := strings.Cut(strings.TrimSpace(s), "-")
	if !found {
		hi = lo
	}
	a, err1 := strconv.Atoi(lo)
	b, err2 := strconv.Atoi(hi)
	if err1 != nil || err2 != nil || a < 1 || b > 65535 || a > b {
		return 0, 0, fmt.Errorf("%q is not a port range like 30000-32767", s)
	}
	return a, b, nil
}

// InPortRange reports whether port is within the range (already valid).
func InPortRange(r string, port int) bool {
	a, b, err := ParsePortRange(r)
	return err == nil && a <= port && port <= b
}

// plan is the cluster's addressing.
func (o Options) plan() (*Plan, error) {
	p, err := NewPlan(o.Name, o.Nodes, o.ClusterCIDR, o.ServiceCIDR)
	if err != nil {
		return nil, err
	}
	return p.WithControlPlanes(max(o.ControlPlanes, 1))
}
