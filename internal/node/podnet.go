package node

import (
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/node/ipam"
)

// PodNetwork gives pods their network namespace, an address from the
// node's pod CIDR and a veth into the node's pod bridge. The node agent
// runs in the node's namespace, so links created here land in it.
type PodNetwork struct {
	Bridge string // the node's pod bridge, e.g. cbr0
	Prefix string // of pod namespace names: svcnet-<cluster>-<node>-
	IPAM   *ipam.Allocator
}

// Owners lists the pod uids holding addresses (to clean up after a
// restart the pods that no longer exist).
func (n *PodNetwork) Owners() []string { return n.IPAM.Owners() }

// Netns names the namespace of a pod.
func (n *PodNetwork) Netns(uid string) string { return n.Prefix + shortID(uid) }

func shortID(uid string) string {
	h := fnv.New32a()
	h.Write([]byte(uid))
	return fmt.Sprintf("%08x", h.Sum32())
}

// vethName is the node side of a pod's veth (at most 15 characters).
func vethName(uid string) string { return "vp" + shortID(uid) }

// Setup creates (or finds) the pod's namespace and returns its address.
func (n *PodNetwork) Setup(uid string) (netip.Addr, string, error) {
	ns := n.Netns(uid)
	ip, err := n.IPAM.Allocate(uid)
	if err != nil {
		return netip.Addr{}, "", err
	}
	if err := n.wire(uid, ns, ip); err != nil {
		n.Teardown(uid)
		return netip.Addr{}, "", fmt.Errorf("pod network: %w", err)
	}
	// A hold or a guard that an earlier run of the agent left ends: this
	// run has not seen the crash the hold was for, and puts the guard
	// back once it knows the pod Ready.
	if err := n.Unhold(uid, ip); err != nil {
		return netip.Addr{}, "", fmt.Errorf("pod network: end an earlier run's crash hold: %w", err)
	}
	if err := n.Unguard(uid, ip); err != nil {
		return netip.Addr{}, "", fmt.Errorf("pod network: remove an earlier run's serving guard: %w", err)
	}
	return ip, ns, nil
}

func (n *PodNetwork) wire(uid, ns string, ip netip.Addr) error {
	if err := netns.Create(ns); err != nil {
		return err
	}
	// Any user of the pod may bind ports below 1024 in its own network
	// namespace, as containerd 2 and Docker set it up (servers listen on
	// 80 as users, as Kubernetes' e2e tests have them do).
	if err := netns.Sysctl(ns, "net.ipv4.ip_unprivileged_port_start", "0"); err != nil {
		return err
	}
	br, err := netlink.LinkByName(n.Bridge)
	if err != nil {
		return fmt.Errorf("pod bridge %s: %w", n.Bridge, err)
	}
	fd, err := netns.Fd(ns)
	if err != nil {
		return err
	}
	defer fd.Close()
	ph, err := netns.Handle(ns)
	if err != nil {
		return err
	}
	defer ph.Close()
	host := vethName(uid)
	if _, err := ph.LinkByName("eth0"); err != nil {
		if old, err := netlink.LinkByName(host); err == nil {
			_ = netlink.LinkDel(old) // half-made earlier
		}
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: host, MasterIndex: br.Attrs().Index},
			PeerName: "eth0", PeerNamespace: netlink.NsFd(int(fd))}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("veth %s: %w", host, err)
		}
	}
	hl, err := netlink.LinkByName(host)
	if err != nil {
		return err
	}
	// Hairpin lets a pod reach itself through a service.
	if err := netlink.LinkSetHairpin(hl, true); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(hl); err != nil {
		return err
	}
	eth0, err := ph.LinkByName("eth0")
	if err != nil {
		return err
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(n.IPAM.CIDR.Bits(), 32)}}
	if err := ph.AddrReplace(eth0, addr); err != nil {
		return err
	}
	if err := ph.LinkSetUp(eth0); err != nil {
		return err
	}
	if err := ph.RouteReplace(&netlink.Route{Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, Gw: n.IPAM.Gateway.AsSlice()}); err != nil {
		return err
	}
	n.announce(ns, ip, eth0.Attrs().HardwareAddr)
	return nil
}

// announce makes the node and the other pods on the bridge map ip to the
// new pod's hardware address now. The node's own entry is written
// directly (it is ours); the pods learn it from gratuitous ARPs, repeated
// a few times because the bridge forwards through the new port only once
// the kernel has noticed its carrier, asynchronously.
func (n *PodNetwork) announce(ns string, ip netip.Addr, mac net.HardwareAddr) {
	if br, err := netlink.LinkByName(n.Bridge); err == nil {
		_ = netlink.NeighSet(&netlink.Neigh{LinkIndex: br.Attrs().Index, Family: netlink.FAMILY_V4,
			IP: ip.AsSlice(), HardwareAddr: mac, State: netlink.NUD_REACHABLE})
	}
	go func() {
		for _, d := range []time.Duration{0, 100 * time.Millisecond, 500 * time.Millisecond} {
			time.Sleep(d)
			if err := netns.GratuitousARP(ns, "eth0", ip); err != nil {
				return // the pod is gone already
			}
		}
	}()
}

// Teardown removes the pod's namespace (and its veth) and frees its address.
func (n *PodNetwork) Teardown(uid string) {
	if err := netns.Delete(n.Netns(uid)); err != nil {
		_ = err // gone or not, the address is freed below
	}
	if l, err := netlink.LinkByName(vethName(uid)); err == nil {
		_ = netlink.LinkDel(l)
	}
	// The node forgets the pod's hardware address with the pod: a stale
	// entry would send the next holder of the address's traffic nowhere.
	br, brErr := netlink.LinkByName(n.Bridge)
	for _, ip := range n.IPAM.Release(uid) {
		if brErr == nil {
			_ = netlink.NeighDel(&netlink.Neigh{LinkIndex: br.Attrs().Index, Family: netlink.FAMILY_V4, IP: ip.AsSlice()})
		}
	}
}
