package svcstate

import (
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Family returns the IP family of a.
func Family(a netip.Addr) v1.IPFamily {
	if a.Is4() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

// parseIP accepts only canonical-enough unicast addresses a proxy may
// program: no zones, no IPv4-mapped IPv6 (their family is ambiguous), and
// nothing that would let an API object steer traffic to the node itself
// (loopback, link-local) or nowhere (unspecified, multicast).
func parseIP(s string) (netip.Addr, Reason) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil || a.Zone() != "" || a.Is4In6() {
		return netip.Addr{}, ReasonMalformedIP
	}
	if a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
		return netip.Addr{}, ReasonSpecialIP
	}
	return a, ""
}

// parseCIDR accepts a prefix with host bits set, as kube-proxy does, and
// masks it.
func parseCIDR(s string) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil || p.Addr().Zone() != "" || p.Addr().Is4In6() {
		return netip.Prefix{}, false
	}
	return p.Masked(), true
}

func validProtocol(p v1.Protocol) bool {
	return p == v1.ProtocolTCP || p == v1.ProtocolUDP || p == v1.ProtocolSCTP
}

func validPort(p int32) bool { return p >= 1 && p <= 65535 }
