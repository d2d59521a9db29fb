package ipvs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
)

// Netlink is Links in the caller's network namespace.
type Netlink struct{}

func family(f v1.IPFamily) int {
	if f == v1.IPv6Protocol {
		return netlink.FAMILY_V6
	}
	return netlink.FAMILY_V4
}

// EnsureDummy implements Links. The link stays down, as kube-proxy leaves
// it: it only makes its addresses local.
func (Netlink) EnsureDummy(name string) (bool, error) {
	l, err := netlink.LinkByName(name)
	if err == nil {
		if l.Type() != "dummy" {
			return false, fmt.Errorf("%s exists and is a %s link, not dummy", name, l.Type())
		}
		return false, nil
	}
	var nf netlink.LinkNotFoundError
	if !errors.As(err, &nf) {
		return false, err
	}
	if err := netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
		return false, fmt.Errorf("create dummy link %s (does this kernel have the dummy driver?): %w", name, err)
	}
	return true, nil
}

func addrsOf(l netlink.Link, f v1.IPFamily) ([]netip.Addr, error) {
	as, err := netlink.AddrList(l, family(f))
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range as {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || ip.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, ip.Unmap())
	}
	return out, nil
}

// Addresses implements Links.
func (Netlink) Addresses(name string, f v1.IPFamily) ([]netip.Addr, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil, err
	}
	return addrsOf(l, f)
}

func hostNet(a netip.Addr) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}}
}

// AddAddress implements Links.
func (Netlink) AddAddress(name string, a netip.Addr) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	if err := netlink.AddrReplace(l, hostNet(a)); err != nil {
		return fmt.Errorf("bind %s to %s: %w", a, name, err)
	}
	return nil
}

// DeleteAddress implements Links.
func (Netlink) DeleteAddress(name string, a netip.Addr) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	if err := netlink.AddrDel(l, hostNet(a)); err != nil {
		return fmt.Errorf("unbind %s from %s: %w", a, name, err)
	}
	return nil
}

// OtherAddresses implements Links.
func (Netlink) OtherAddresses(name string, f v1.IPFamily) ([]netip.Addr, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, l := range links {
		if l.Attrs().Name == name {
			continue
		}
		as, err := addrsOf(l, f)
		if err != nil {
			return nil, err
		}
		out = append(out, as...)
	}
	return out, nil
}

// DeleteDummy removes the dummy link and with it every address bound to
// it; a missing link is no error.
func DeleteDummy(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return err
	}
	if l.Type() != "dummy" {
		return fmt.Errorf("%s is a %s link, not dummy: left alone", name, l.Type())
	}
	return netlink.LinkDel(l)
}
