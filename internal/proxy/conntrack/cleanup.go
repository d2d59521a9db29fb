package conntrack

import (
	"cmp"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// NAT is a service address and an endpoint it was DNATed to.
type NAT struct {
	Proto        v1.Protocol
	Origin, Dest netip.Addr
}

// PortNAT is a node port and an endpoint it was DNATed to.
type PortNAT struct {
	Proto v1.Protocol
	Port  int
	Dest  netip.Addr
}

// Cleanup is what to delete after a sync.
type Cleanup struct {
	// IPs and Ports are UDP service addresses and node ports that got
	// their first endpoint: what was sent to them before went nowhere,
	// and its entries would keep it going nowhere.
	IPs   []netip.Addr
	Ports []int
	// NATs and PortNATs pair service addresses and node ports with the
	// endpoints they no longer reach, for UDP and TCP.
	NATs     []NAT
	PortNATs []PortNAT
}

// Empty reports whether there is nothing to delete.
func (c Cleanup) Empty() bool {
	return len(c.IPs) == 0 && len(c.Ports) == 0 && len(c.NATs) == 0 && len(c.PortNATs) == 0
}

// Plan compares what the rules reached before a sync (prev; nil before
// the first one, when there is nothing to clean) with what they reach
// after it (cur), for the UDP and TCP ports that changed, as one node of
// one IP family sees them.
func Plan(prev, cur *svcstate.Snapshot, changed map[svcstate.ServicePortName]struct{}, node proxy.Node, family v1.IPFamily) Cleanup {
	var c Cleanup
	if prev == nil {
		return c
	}
	for n := range changed {
		if n.Protocol != v1.ProtocolUDP && n.Protocol != v1.ProtocolTCP {
			continue
		}
		before := viewOf(prev, n, node, family)
		after := viewOf(cur, n, node, family)
		// A TCP SYN to a port without endpoints is rejected, which
		// leaves no entry.
		if n.Protocol == v1.ProtocolUDP && len(before.reach) == 0 && len(after.reach) > 0 {
			c.IPs = append(c.IPs, after.addrs...)
			if after.nodePort != 0 {
				c.Ports = append(c.Ports, after.nodePort)
			}
		}
		for _, ep := range before.reach {
			if slices.ContainsFunc(after.reach, func(e svcstate.Endpoint) bool { return e.IP == ep.IP && e.Port == ep.Port }) {
				continue
			}
			for _, a := range before.addrs {
				c.NATs = append(c.NATs, NAT{Proto: n.Protocol, Origin: a, Dest: ep.IP})
			}
			if before.nodePort != 0 {
				c.PortNATs = append(c.PortNATs, PortNAT{Proto: n.Protocol, Port: before.nodePort, Dest: ep.IP})
			}
		}
	}
	slices.SortFunc(c.IPs, netip.Addr.Compare)
	c.IPs = slices.Compact(c.IPs)
	slices.Sort(c.Ports)
	c.Ports = slices.Compact(c.Ports)
	slices.SortFunc(c.NATs, func(a, b NAT) int {
		return cmp.Or(cmp.Compare(a.Proto, b.Proto), a.Origin.Compare(b.Origin), a.Dest.Compare(b.Dest))
	})
	c.NATs = slices.Compact(c.NATs)
	slices.SortFunc(c.PortNATs, func(a, b PortNAT) int {
		return cmp.Or(cmp.Compare(a.Proto, b.Proto), cmp.Compare(a.Port, b.Port), a.Dest.Compare(b.Dest))
	})
	c.PortNATs = slices.Compact(c.PortNATs)
	return c
}

type portView struct {
	addrs    []netip.Addr // cluster, external and load-balancer IPs
	nodePort int
	reach    []svcstate.Endpoint
}

func viewOf(s *svcstate.Snapshot, n svcstate.ServicePortName, node proxy.Node, family v1.IPFamily) portView {
	if s == nil {
		return portView{}
	}
	p, eps := s.Port(n)
	if p == nil || !p.Proxied() {
		return portView{}
	}
	p = p.ForFamily(family)
	ip := p.ClusterIP(family)
	if !ip.IsValid() {
		return portView{}
	}
	var mine []svcstate.Endpoint
	for _, e := range eps {
		if svcstate.Family(e.IP) == family {
			mine = append(mine, e)
		}
	}
	v := portView{nodePort: p.NodePort, reach: proxy.Select(p, mine, node).Reachable}
	v.addrs = append(append(append(v.addrs, ip), p.ExternalIPs...), p.LoadBalancerIPs...)
	return v
}
