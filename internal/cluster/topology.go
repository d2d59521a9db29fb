package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/svcnet/svcnet/internal/netns"
)

// UnderlayBridge is the switch of the underlay, in the underlay namespace.
const UnderlayBridge = "svcnet0"

// PodBridge is each node's pod bridge.
const PodBridge = "cbr0"

// Build creates the cluster's namespaces and wires them: the underlay
// bridge, a veth from each host to it, the pod bridge of each node,
// routes between nodes' pod CIDRs, and forwarding only inside the nodes.
func (p *Plan) Build() error {
	under := p.UnderlayNetns()
	if err := netns.Create(under); err != nil {
		return err
	}
	uh, err := netns.Handle(under)
	if err != nil {
		return err
	}
	defer uh.Close()
	br, err := ensureBridge(uh, UnderlayBridge, netip.PrefixFrom(p.Gateway, p.Underlay.Bits()))
	if err != nil {
		return fmt.Errorf("underlay bridge: %w", err)
	}
	// The underlay host routes to pods too: the API server and the
	// control plane answer pods through it.
	if err := netns.Sysctl(under, "net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	hosts := []struct {
		netns, port string
		addr        netip.Addr
	}{{p.ClientNetns(), "client", p.Client}, {p.EdgeNetns(), "edge", p.Edge}}
	for _, n := range p.Nodes {
		hosts = append(hosts, struct {
			netns, port string
			addr        netip.Addr
		}{n.Netns, n.Port, n.IP})
	}
	for _, cp := range p.ControlPlanes {
		hosts = append(hosts, struct {
			netns, port string
			addr        netip.Addr
		}{cp.Netns, cp.Port, cp.IP})
	}
	for _, h := range hosts {
		if err := netns.Create(h.netns); err != nil {
			return err
		}
		if err := p.plug(uh, br, h.netns, h.port, h.addr); err != nil {
			return fmt.Errorf("connect %s to the underlay: %w", h.netns, err)
		}
	}
	for _, n := range p.Nodes {
		if err := p.buildNode(n); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		if err := replaceRoute(uh, n.PodCIDR, n.IP); err != nil {
			return err
		}
	}
	// Control-plane hosts answer pods (and reach them: webhooks,
	// services/proxy) through each pod's node; so does the edge, where
	// pods reach the API's balancer.
	routed := []string{}
	for _, cp := range p.ControlPlanes {
		routed = append(routed, cp.Netns)
	}
	if p.HA() {
		routed = append(routed, p.EdgeNetns())
	}
	for _, name := range routed {
		h, err := netns.Handle(name)
		if err != nil {
			return err
		}
		for _, n := range p.Nodes {
			if err := replaceRoute(h, n.PodCIDR, n.IP); err != nil {
				h.Close()
				return err
			}
		}
		h.Close()
	}
	return nil
}

// plug connects a host namespace to the underlay bridge with a veth whose
// inside end is eth0 with addr.
func (p *Plan) plug(uh *netlink.Handle, br netlink.Link, hostNetns, port string, addr netip.Addr) error {
	hfd, err := netns.Fd(hostNetns)
	if err != nil {
		return err
	}
	defer hfd.Close()
	hh, err := netns.Handle(hostNetns)
	if err != nil {
		return err
	}
	defer hh.Close()
	if _, err := hh.LinkByName("eth0"); err != nil {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: port, MasterIndex: br.Attrs().Index},
			PeerName: "eth0", PeerNamespace: netlink.NsFd(int(hfd))}
		if err := uh.LinkAdd(veth); err != nil {
			return fmt.Errorf("veth %s: %w", port, err)
		}
	}
	l, err := uh.LinkByName(port)
	if err != nil {
		return err
	}
	if err := uh.LinkSetUp(l); err != nil {
		return err
	}
	eth0, err := hh.LinkByName("eth0")
	if err != nil {
		return err
	}
	if err := ensureAddr(hh, eth0, netip.PrefixFrom(addr, p.Underlay.Bits())); err != nil {
		return err
	}
	return hh.LinkSetUp(eth0)
}

func (p *Plan) buildNode(n NodePlan) error {
	h, err := netns.Handle(n.Netns)
	if err != nil {
		return err
	}
	defer h.Close()
	if _, err := ensureBridge(h, PodBridge, netip.PrefixFrom(n.PodGW, n.PodCIDR.Bits())); err != nil {
		return err
	}
	for _, other := range p.Nodes {
		if other.Name != n.Name {
			if err := replaceRoute(h, other.PodCIDR, other.IP); err != nil {
				return err
			}
		}
	}
	// A node's own connections to a ClusterIP need a route before the
	// proxy's rules rewrite them (a real node has its default route; ours
	// have none, so that nothing leaves the cluster's namespaces).
	if err := replaceRoute(h, p.ServiceCIDR, p.Gateway); err != nil {
		return err
	}
	// Forwarding, and iptables on bridged traffic (so that a pod reaching
	// a service backed by a pod on the same bridge is un-NATed on the way
	// back), only inside the node.
	for key, value := range map[string]string{
		"net.ipv4.ip_forward":                 "1",
		"net.bridge.bridge-nf-call-iptables":  "1",
		"net.bridge.bridge-nf-call-ip6tables": "1",
		"net.ipv4.conf.all.route_localnet":    "1",
	} {
		if err := netns.Sysctl(n.Netns, key, value); err != nil {
			return err
		}
	}
	return nil
}

func ensureBridge(h *netlink.Handle, name string, addr netip.Prefix) (netlink.Link, error) {
	l, err := h.LinkByName(name)
	if err != nil {
		if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
			return nil, fmt.Errorf("bridge %s: %w", name, err)
		}
		if l, err = h.LinkByName(name); err != nil {
			return nil, err
		}
	}
	if mac := bridgeMAC(addr.Addr()); !bytes.Equal(l.Attrs().HardwareAddr, mac) {
		if err := h.LinkSetHardwareAddr(l, mac); err != nil {
			return nil, fmt.Errorf("bridge %s: address %s: %w", name, mac, err)
		}
	}
	if err := ensureAddr(h, l, addr); err != nil {
		return nil, err
	}
	return l, h.LinkSetUp(l)
}

// bridgeMAC is the fixed hardware address of the bridge whose own IP
// address is ip, as Docker gives docker0 one: locally administered
// (02:42), then the address's last four bytes. A bridge left to choose
// takes the lowest of its ports' addresses and changes it as pods come
// and go; the pods keep sending to the address they learnt, and once
// its port is gone the bridge no longer takes those frames as its own
// but floods them to the other ports: everything a pod sends to the
// node itself (its node-local DNS cache, the node's address) is lost
// until the pod learns the new address, while what a Service's DNAT
// sends elsewhere still passes (the bridge's netfilter routes it anew).
// That is the state the intermittent StatefulSet DNS stall's
// diagnostics showed: the bridge's address without an entry of its own
// in its forwarding database. A bridge given its address keeps it, and
// the entry, whatever its ports.
func bridgeMAC(ip netip.Addr) net.HardwareAddr {
	b := ip.As16()
	return net.HardwareAddr{0x02, 0x42, b[12], b[13], b[14], b[15]}
}

func ensureAddr(h *netlink.Handle, l netlink.Link, p netip.Prefix) error {
	a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
	if err := h.AddrReplace(l, a); err != nil {
		return fmt.Errorf("address %s on %s: %w", p, l.Attrs().Name, err)
	}
	return nil
}

func replaceRoute(h *netlink.Handle, dst netip.Prefix, via netip.Addr) error {
	r := &netlink.Route{Dst: &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), 32)}, Gw: via.AsSlice()}
	if err := h.RouteReplace(r); err != nil {
		return fmt.Errorf("route %s via %s: %w", dst, via, err)
	}
	return nil
}

// Destroy removes every namespace of the named cluster (pods' too), and
// with them all their interfaces.
func Destroy(name string) error {
	names, err := netns.List(NetnsPrefix(name))
	if err != nil {
		return err
	}
	var errs []error
	// Pods first, then nodes, then the underlay; order only matters for
	// tidiness: deleting a namespace deletes its veths and their peers.
	for _, n := range names {
		errs = append(errs, netns.Delete(n))
	}
	// The nodes' cgroups, their processes killed with the namespaces'.
	errs = append(errs, removeCgroups(name))
	return errors.Join(errs...)
}
