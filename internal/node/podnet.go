package node

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"

	"github.com/svcnet/svcnet/internal/netns"
)

// PodNetwork gives pods their network namespace, an address from the
// node's pod CIDR and a veth into the node's pod bridge. The node agent
// runs in the node's namespace, so links created here land in it.
type PodNetwork struct {
	Bridge  string       // the node's pod bridge, e.g. cbr0
	CIDR    netip.Prefix // the node's pod CIDR
	Gateway netip.Addr   // the bridge's address
	Prefix  string       // of pod namespace names: svcnet-<cluster>-<node>-
	Dir     string       // where address allocations are kept

	mu sync.Mutex
}

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
	ip, err := n.allocate(uid)
	if err != nil {
		return netip.Addr{}, "", err
	}
	if err := n.wire(uid, ns, ip); err != nil {
		n.Teardown(uid)
		return netip.Addr{}, "", fmt.Errorf("pod network: %w", err)
	}
	return ip, ns, nil
}

func (n *PodNetwork) wire(uid, ns string, ip netip.Addr) error {
	if err := netns.Create(ns); err != nil {
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
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(n.CIDR.Bits(), 32)}}
	if err := ph.AddrReplace(eth0, addr); err != nil {
		return err
	}
	if err := ph.LinkSetUp(eth0); err != nil {
		return err
	}
	return ph.RouteReplace(&netlink.Route{Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, Gw: n.Gateway.AsSlice()})
}

// Teardown removes the pod's namespace (and its veth) and frees its address.
func (n *PodNetwork) Teardown(uid string) {
	if err := netns.Delete(n.Netns(uid)); err != nil {
		_ = err // gone or not, the address is freed below
	}
	if l, err := netlink.LinkByName(vethName(uid)); err == nil {
		_ = netlink.LinkDel(l)
	}
	n.release(uid)
}

// allocate gives uid the lowest free address, the same one again if it
// has one. Allocations are files named by address holding the pod's uid,
// so a restarted agent does not hand out a running pod's address.
func (n *PodNetwork) allocate(uid string) (netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return netip.Addr{}, err
	}
	entries, err := os.ReadDir(n.Dir)
	if err != nil {
		return netip.Addr{}, err
	}
	used := map[netip.Addr]bool{}
	for _, e := range entries {
		a, err := netip.ParseAddr(e.Name())
		if err != nil {
			continue
		}
		owner, _ := os.ReadFile(filepath.Join(n.Dir, e.Name()))
		if strings.TrimSpace(string(owner)) == uid {
			return a, nil
		}
		used[a] = true
	}
	last := lastAddr(n.CIDR)
	for a := n.CIDR.Addr().Next(); a.Less(last) && n.CIDR.Contains(a); a = a.Next() {
		if a == n.Gateway || used[a] {
			continue
		}
		if err := os.WriteFile(filepath.Join(n.Dir, a.String()), []byte(uid), 0o644); err != nil {
			return netip.Addr{}, err
		}
		return a, nil
	}
	return netip.Addr{}, errors.New("no pod addresses left on this node")
}

func (n *PodNetwork) release(uid string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	entries, _ := os.ReadDir(n.Dir)
	for _, e := range entries {
		owner, _ := os.ReadFile(filepath.Join(n.Dir, e.Name()))
		if strings.TrimSpace(string(owner)) == uid {
			_ = os.Remove(filepath.Join(n.Dir, e.Name()))
		}
	}
}

// Owners lists the pod uids holding addresses (to clean up after a
// restart the pods that no longer exist).
func (n *PodNetwork) Owners() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	entries, _ := os.ReadDir(n.Dir)
	var out []string
	for _, e := range entries {
		if owner, err := os.ReadFile(filepath.Join(n.Dir, e.Name())); err == nil {
			out = append(out, strings.TrimSpace(string(owner)))
		}
	}
	return out
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := 32 - p.Bits()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= (1 << host) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
