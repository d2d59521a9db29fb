// Package conntrack removes connection-tracking entries that would keep
// sending traffic to endpoints the rules no longer choose. A UDP
// "connection" (a DNS client reusing its source port, say) stays in
// conntrack as long as packets keep flowing, and every packet follows the
// entry's DNAT, not the rules; without cleanup, a client keeps talking to
// a removed pod forever. For TCP only the connections that never got an
// answer go (state SYN_SENT): conntrack keeps such an entry 120 s, and a
// retransmitted SYN, or a new connection from the same source port,
// follows its DNAT to an endpoint that may be gone (kube-proxy leaves
// them: kubernetes#101607). Answered TCP connections to a removed
// endpoint stay, so a terminating pod finishes what it serves.
package conntrack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// Interface is the cleanup's one effect on the kernel. Netlink deletes
// the entries; Fake records what it was asked.
type Interface interface {
	// Delete deletes the entries of family that c describes (see
	// Cleanup) and says how many went.
	Delete(ctx context.Context, c Cleanup, family v1.IPFamily) (int, error)
}

// Netlink deletes entries over netlink in one pass: it lists the table
// once and deletes each entry that matches, whatever the size of the
// cleanup (kube-proxy did the same in 1.30 after years of one conntrack
// process per service address and endpoint).
type Netlink struct {
	// Handle is the netlink socket of the namespace to clean; nil: the
	// process's own, the one whose rules the proxy programs.
	Handle *netlink.Handle
}

// Delete implements Interface. Entries that vanish between the listing
// and their deletion (expired, or deleted by another) count as deleted.
func (n *Netlink) Delete(_ context.Context, c Cleanup, family v1.IPFamily) (int, error) {
	if c.Empty() {
		return 0, nil
	}
	h := n.Handle
	if h == nil {
		var err error
		if h, err = netlink.NewHandle(unix.NETLINK_NETFILTER); err != nil {
			return 0, fmt.Errorf("conntrack: netlink socket: %w", err)
		}
		defer h.Close()
	}
	fam := netlink.InetFamily(unix.AF_INET)
	if family == v1.IPv6Protocol {
		fam = unix.AF_INET6
	}
	deleted, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, fam, c.matcher())
	if err != nil {
		return int(deleted), fmt.Errorf("conntrack: delete %d kinds of stale entries: %w", len(c.Lines()), err)
	}
	return int(deleted), nil
}

// matcher tells the entries of a cleanup, each in constant time.
type matcher struct {
	ips      map[netip.Addr]bool
	ports    map[uint16]bool
	nats     map[NAT]bool
	portNATs map[PortNAT]bool
}

func (c Cleanup) matcher() *matcher {
	m := &matcher{ips: map[netip.Addr]bool{}, ports: map[uint16]bool{}, nats: map[NAT]bool{}, portNATs: map[PortNAT]bool{}}
	for _, ip := range c.IPs {
		m.ips[ip] = true
	}
	for _, p := range c.Ports {
		m.ports[uint16(p)] = true
	}
	for _, n := range c.NATs {
		m.nats[n] = true
	}
	for _, n := range c.PortNATs {
		m.portNATs[n] = true
	}
	return m
}

// MatchConntrackFlow implements netlink.CustomConntrackFilter: the
// entry's original direction is what the client sent (to a service
// address or a node port), its reply direction's source the endpoint the
// rules DNATed it to.
func (m *matcher) MatchConntrackFlow(f *netlink.ConntrackFlow) bool {
	var proto v1.Protocol
	switch f.Forward.Protocol {
	case unix.IPPROTO_UDP:
		proto = v1.ProtocolUDP
	case unix.IPPROTO_TCP:
		proto = v1.ProtocolTCP
		// Answered connections stay: a terminating pod finishes them.
		if tcp, ok := f.ProtoInfo.(*netlink.ProtoInfoTCP); !ok || tcp.State != tcpSynSent {
			return false
		}
	default:
		return false
	}
	origDst, dest := addrOf(f.Forward.DstIP), addrOf(f.Reverse.SrcIP)
	port := f.Forward.DstPort
	if proto == v1.ProtocolUDP && (m.ips[origDst] || m.ports[port]) {
		return true
	}
	return m.nats[NAT{Proto: proto, Origin: origDst, Dest: dest}] || m.portNATs[PortNAT{Proto: proto, Port: int(port), Dest: dest}]
}

// tcpSynSent is TCP_CONNTRACK_SYN_SENT: a SYN seen, no answer yet.
const tcpSynSent = 1

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// Fake records the cleanups it is asked for, one line per item (see
// Cleanup.Lines).
type Fake struct {
	mu    sync.Mutex
	calls []string
	// Err, if set, is returned by every call (after recording it).
	Err error
}

// Delete implements Interface.
func (f *Fake) Delete(_ context.Context, c Cleanup, _ v1.IPFamily) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c.Lines()...)
	return 0, f.Err
}

// Calls returns the items so far, sorted, and forgets them.
func (f *Fake) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Sorted(slices.Values(f.calls))
	f.calls = nil
	return out
}

// Lines lists a cleanup one item a line: "ip udp 10.96.0.10",
// "port udp 30053", "nat tcp 10.96.0.20 -> 10.244.1.2",
// "portnat tcp 30080 -> 10.244.1.2".
func (c Cleanup) Lines() []string {
	var out []string
	for _, ip := range c.IPs {
		out = append(out, fmt.Sprintf("ip udp %s", ip))
	}
	for _, p := range c.Ports {
		out = append(out, fmt.Sprintf("port udp %d", p))
	}
	for _, n := range c.NATs {
		out = append(out, fmt.Sprintf("nat %s %s -> %s", lower(n.Proto), n.Origin, n.Dest))
	}
	for _, n := range c.PortNATs {
		out = append(out, fmt.Sprintf("portnat %s %d -> %s", lower(n.Proto), n.Port, n.Dest))
	}
	return out
}

func lower(p v1.Protocol) string { return strings.ToLower(string(p)) }
