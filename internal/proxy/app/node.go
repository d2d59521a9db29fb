package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/proxy"
)

// Interfaces reports the addresses of the network namespace the proxy
// programs. Netlink asks the kernel; tests pass a fixed list.
type Interfaces interface {
	Addrs(family v1.IPFamily) ([]netip.Addr, error)
}

// Netlink lists the addresses of the process's network namespace.
type Netlink struct{}

// Addrs implements Interfaces: global unicast addresses of family, which
// excludes loopback and link-local ones.
func (Netlink) Addrs(family v1.IPFamily) ([]netip.Addr, error) {
	fam := netlink.FAMILY_V4
	if family == v1.IPv6Protocol {
		fam = netlink.FAMILY_V6
	}
	list, err := netlink.AddrList(nil, fam)
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range list {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.IsGlobalUnicast() && !slices.Contains(out, ip) {
			out = append(out, ip)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out, nil
}

// StaticInterfaces is a fixed list of addresses.
type StaticInterfaces []netip.Addr

// Addrs implements Interfaces.
func (s StaticInterfaces) Addrs(family v1.IPFamily) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range s {
		if a.Is4() == (family == v1.IPv4Protocol) {
			out = append(out, a)
		}
	}
	return out, nil
}

// nodeWait is how long the proxy waits for its Node object: a node agent
// may start the proxy before it has registered the node.
const nodeWait = 10 * time.Second

// resolveNode returns the node's topology and its addresses of each family:
// those of the Node object's status.addresses (InternalIP, then
// ExternalIP), else the namespace's own.
func resolveNode(ctx context.Context, client kubernetes.Interface, name string, families []v1.IPFamily, ifaces Interfaces, logger *slog.Logger) (proxy.Node, map[v1.IPFamily][]netip.Addr, error) {
	node := proxy.Node{Name: name}
	var obj *v1.Node
	deadline := time.Now().Add(nodeWait)
	for {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			obj = n
			break
		}
		if ctx.Err() != nil {
			return node, nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			if !apierrors.IsNotFound(err) {
				logger.Warn("cannot read the Node; using the namespace's addresses", "node", name, "err", err)
			} else {
				logger.Warn("no Node object; using the namespace's addresses", "node", name)
			}
			break
		}
		select {
		case <-ctx.Done():
			return node, nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	if obj != nil {
		node.Zone = obj.Labels[v1.LabelTopologyZone]
	}
	out := map[v1.IPFamily][]netip.Addr{}
	for _, family := range families {
		var addrs []netip.Addr
		if obj != nil {
			addrs = nodeObjectAddrs(obj, family)
		}
		if len(addrs) == 0 {
			var err error
			if addrs, err = ifaces.Addrs(family); err != nil {
				return node, nil, err
			}
		}
		out[family] = addrs
	}
	return node, out, nil
}

func nodeObjectAddrs(n *v1.Node, family v1.IPFamily) []netip.Addr {
	var out []netip.Addr
	for _, typ := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		for _, a := range n.Status.Addresses {
			if a.Type != typ {
				continue
			}
			ip, err := netip.ParseAddr(a.Address)
			if err != nil || ip.Is4() != (family == v1.IPv4Protocol) || slices.Contains(out, ip) {
				continue
			}
			out = append(out, ip)
		}
	}
	return out
}
