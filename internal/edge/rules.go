// Package edge is the local cluster's edge load balancer: the host on the
// underlay that owns LoadBalancer Services' addresses and spreads each
// address:port over the ready nodes' NodePorts, the way a cloud load
// balancer sits in front of a cluster. It runs in its own network
// namespace and programs only that namespace.
package edge

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Chains the edge owns: two in its nat table, one in its filter table.
const (
	ChainPrerouting  = "SVCNET-EDGE"
	ChainPostrouting = "SVCNET-EDGE-POSTROUTING"
	ChainFilter      = "SVCNET-EDGE-FILTER"
)

// Frontend is one load-balanced address:port and its backends.
type Frontend struct {
	Service  string
	IP       netip.Addr
	Port     int32
	Protocol corev1.Protocol
	NodePort int32
	Backends []netip.Addr // node addresses
}

// Frontends computes what to balance from the Services and the nodes that
// may serve each (ready nodes; for externalTrafficPolicy Local, those with
// a local endpoint when that is known).
func Frontends(services []*corev1.Service, backends func(svc *corev1.Service) []netip.Addr) []Frontend {
	var out []Frontend
	for _, svc := range services {
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		nodes := backends(svc)
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			ip, err := netip.ParseAddr(ing.IP)
			if err != nil || !ip.Is4() {
				continue
			}
			for _, p := range svc.Spec.Ports {
				if p.NodePort == 0 || (p.Protocol != corev1.ProtocolTCP && p.Protocol != corev1.ProtocolUDP) {
					continue
				}
				out = append(out, Frontend{Service: svc.Namespace + "/" + svc.Name, IP: ip, Port: p.Port,
					Protocol: p.Protocol, NodePort: p.NodePort, Backends: nodes})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].IP != out[j].IP {
			return out[i].IP.Less(out[j].IP)
		}
		if out[i].Port != out[j].Port {
			return out[i].Port < out[j].Port
		}
		return out[i].Protocol < out[j].Protocol
	})
	return out
}

// Rules renders the frontends as iptables-restore input for the nat table:
// DNAT spread evenly with the statistic match, masquerade so that replies
// come back through the edge, and REJECT for a frontend without backends.
func Rules(fs []Frontend) string {
	var b strings.Builder
	b.WriteString("*nat\n")
	fmt.Fprintf(&b, ":%s - [0:0]\n:%s - [0:0]\n", ChainPrerouting, ChainPostrouting)
	for _, f := range fs {
		proto := strings.ToLower(string(f.Protocol))
		match := fmt.Sprintf("-A %s -m comment --comment %q -d %s/32 -p %s -m %s --dport %d", ChainPrerouting, f.Service, f.IP, proto, proto, f.Port)
		n := len(f.Backends)
		for i, node := range f.Backends {
			stat := ""
			if remaining := n - i; remaining > 1 {
				stat = fmt.Sprintf(" -m statistic --mode random --probability %.10f", 1/float64(remaining))
			}
			fmt.Fprintf(&b, "%s%s -j DNAT --to-destination %s:%d\n", match, stat, node, f.NodePort)
		}
	}
	fmt.Fprintf(&b, "-A %s -m conntrack --ctstate DNAT -m comment --comment \"load-balanced traffic returns through the edge\" -j MASQUERADE\n", ChainPostrouting)
	b.WriteString("COMMIT\n*filter\n:SVCNET-EDGE-FILTER - [0:0]\n")
	for _, f := range fs {
		if len(f.Backends) == 0 {
			proto := strings.ToLower(string(f.Protocol))
			fmt.Fprintf(&b, "-A SVCNET-EDGE-FILTER -m comment --comment \"%s has no healthy backend\" -d %s/32 -p %s -m %s --dport %d -j REJECT\n",
				f.Service, f.IP, proto, proto, f.Port)
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}
