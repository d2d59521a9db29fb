// Package ipvs is svcnet's one library for the kernel's IP Virtual Server
// (netlink, through github.com/moby/ipvs): virtual servers, their real
// servers, and the IPVS timeouts, in the network namespace of the caller
// or a named one. Every writer of IPVS state (the proxy's ipvs mode, its
// cleanup, the tracer) goes through it.
package ipvs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	mobyipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
)

// Protocol numbers as IPVS names them.
const (
	TCP  = syscall.IPPROTO_TCP
	UDP  = syscall.IPPROTO_UDP
	SCTP = 132
)

// FlagPersistent is IP_VS_SVC_F_PERSISTENT: ClientIP affinity.
const FlagPersistent = 0x1

// flagHashed is IP_VS_SVC_F_HASHED, which the kernel sets on every
// service it holds; it is not ours to compare.
const flagHashed = 0x2

// Service is one virtual server.
type Service struct {
	Addr      netip.Addr
	Protocol  uint16
	Port      uint16
	Scheduler string
	// Flags: FlagPersistent with Timeout (seconds) for ClientIP affinity.
	Flags   uint32
	Timeout uint32
}

// Key identifies a virtual server: address, protocol and port.
type Key struct {
	Addr     netip.Addr
	Protocol uint16
	Port     uint16
}

// Key returns s's identity.
func (s Service) Key() Key { return Key{s.Addr, s.Protocol, s.Port} }

func (k Key) String() string {
	return ProtocolName(k.Protocol) + "/" + netip.AddrPortFrom(k.Addr, k.Port).String()
}

// ProtocolName is "TCP", "UDP" or "SCTP".
func ProtocolName(p uint16) string {
	switch p {
	case TCP:
		return "TCP"
	case UDP:
		return "UDP"
	case SCTP:
		return "SCTP"
	}
	return fmt.Sprintf("proto-%d", p)
}

// Destination is one real server of a virtual server, in masquerade
// (NAT) forwarding.
type Destination struct {
	Addr   netip.Addr
	Port   uint16
	Weight int
	// ActiveConns and InactiveConns are read back from the kernel.
	ActiveConns, InactiveConns int
}

// AddrPort is the destination's address and port.
func (d Destination) AddrPort() netip.AddrPort { return netip.AddrPortFrom(d.Addr, d.Port) }

// Handle talks to IPVS in one network namespace.
type Handle struct{ h *mobyipvs.Handle }

// Open returns a handle on IPVS in the namespace at nsPath ("" for the
// caller's). It fails with ErrUnsupported on a kernel without IPVS.
func Open(nsPath string) (*Handle, error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	h, err := mobyipvs.New(nsPath)
	if err != nil {
		return nil, fmt.Errorf("ipvs: %w", err)
	}
	return &Handle{h: h}, nil
}

// Close releases the handle's sockets.
func (h *Handle) Close() { h.h.Close() }

// ErrUnsupported says the kernel has no IPVS.
var ErrUnsupported = errors.New("this kernel has no IPVS (no ip_vs module, none built in)")

// Supported checks that the kernel has IPVS: /proc/net/ip_vs exists once
// the ip_vs module is loaded or built in; when it is not, a kernel that
// has the module loads it on the first netlink request, so that is
// tried before giving up.
func Supported() error {
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
		return nil
	}
	// Asking for the IPVS generic netlink family makes the kernel load
	// ip_vs if it has it as a module (moby/ipvs would run a modprobe
	// and log to stderr).
	_, _ = netlink.GenlFamilyGet("IPVS")
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
		return nil
	}
	return ErrUnsupported
}

func toMobyService(s Service) *mobyipvs.Service {
	af := uint16(syscall.AF_INET)
	mask := uint32(0xffffffff)
	if s.Addr.Is6() {
		af, mask = syscall.AF_INET6, 128
	}
	return &mobyipvs.Service{
		Address: net.IP(s.Addr.AsSlice()), Protocol: s.Protocol, Port: s.Port, SchedName: s.Scheduler,
		Flags: s.Flags, Timeout: s.Timeout, Netmask: mask, AddressFamily: af,
	}
}

func fromMobyService(m *mobyipvs.Service) (Service, bool) {
	a, ok := netip.AddrFromSlice(m.Address)
	if !ok || m.FWMark != 0 {
		return Service{}, false // firewall-mark services are not ours
	}
	return Service{Addr: a.Unmap(), Protocol: m.Protocol, Port: m.Port, Scheduler: m.SchedName,
		Flags: m.Flags &^ flagHashed, Timeout: m.Timeout}, true
}

// Services lists the virtual servers (address-based ones; firewall-mark
// services are left out).
func (h *Handle) Services() ([]Service, error) {
	ms, err := h.h.GetServices()
	if err != nil {
		return nil, fmt.Errorf("ipvs: list services: %w", err)
	}
	out := make([]Service, 0, len(ms))
	for _, m := range ms {
		if s, ok := fromMobyService(m); ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// AddService creates s.
func (h *Handle) AddService(s Service) error {
	if err := h.h.NewService(toMobyService(s)); err != nil {
		return fmt.Errorf("ipvs: add %s: %w", s.Key(), explain(err, s.Scheduler))
	}
	return nil
}

// UpdateService changes s's scheduler, flags or timeout.
func (h *Handle) UpdateService(s Service) error {
	if err := h.h.UpdateService(toMobyService(s)); err != nil {
		return fmt.Errorf("ipvs: update %s: %w", s.Key(), explain(err, s.Scheduler))
	}
	return nil
}

// DeleteService removes s and its real servers.
func (h *Handle) DeleteService(s Service) error {
	if err := h.h.DelService(toMobyService(s)); err != nil {
		return fmt.Errorf("ipvs: delete %s: %w", s.Key(), err)
	}
	return nil
}

// Flush removes every virtual server.
func (h *Handle) Flush() error { return h.h.Flush() }

func toMobyDest(d Destination) *mobyipvs.Destination {
	af := uint16(syscall.AF_INET)
	if d.Addr.Is6() {
		af = syscall.AF_INET6
	}
	return &mobyipvs.Destination{Address: net.IP(d.Addr.AsSlice()), Port: d.Port, Weight: d.Weight,
		ConnectionFlags: mobyipvs.ConnectionFlagMasq, AddressFamily: af}
}

// Destinations lists s's real servers with their connection counts.
func (h *Handle) Destinations(s Service) ([]Destination, error) {
	ms, err := h.h.GetDestinations(toMobyService(s))
	if err != nil {
		return nil, fmt.Errorf("ipvs: list real servers of %s: %w", s.Key(), err)
	}
	out := make([]Destination, 0, len(ms))
	for _, m := range ms {
		a, ok := netip.AddrFromSlice(m.Address)
		if !ok {
			continue
		}
		out = append(out, Destination{Addr: a.Unmap(), Port: m.Port, Weight: m.Weight,
			ActiveConns: m.ActiveConnections, InactiveConns: m.InactiveConnections})
	}
	return out, nil
}

// AddDestination adds d to s.
func (h *Handle) AddDestination(s Service, d Destination) error {
	if err := h.h.NewDestination(toMobyService(s), toMobyDest(d)); err != nil {
		return fmt.Errorf("ipvs: add real server %s to %s: %w", d.AddrPort(), s.Key(), err)
	}
	return nil
}

// UpdateDestination changes d's weight.
func (h *Handle) UpdateDestination(s Service, d Destination) error {
	if err := h.h.UpdateDestination(toMobyService(s), toMobyDest(d)); err != nil {
		return fmt.Errorf("ipvs: update real server %s of %s: %w", d.AddrPort(), s.Key(), err)
	}
	return nil
}

// DeleteDestination removes d from s.
func (h *Handle) DeleteDestination(s Service, d Destination) error {
	if err := h.h.DelDestination(toMobyService(s), toMobyDest(d)); err != nil {
		return fmt.Errorf("ipvs: delete real server %s of %s: %w", d.AddrPort(), s.Key(), err)
	}
	return nil
}

// Timeouts are IPVS's connection timeouts (ipvsadm --set); zero leaves
// one unchanged.
type Timeouts struct{ TCP, TCPFin, UDP time.Duration }

// SetTimeouts sets the timeouts that are not zero.
func (h *Handle) SetTimeouts(t Timeouts) error {
	cur, err := h.h.GetConfig()
	if err != nil {
		return fmt.Errorf("ipvs: read timeouts: %w", err)
	}
	if t.TCP > 0 {
		cur.TimeoutTCP = t.TCP
	}
	if t.TCPFin > 0 {
		cur.TimeoutTCPFin = t.TCPFin
	}
	if t.UDP > 0 {
		cur.TimeoutUDP = t.UDP
	}
	if err := h.h.SetConfig(cur); err != nil {
		return fmt.Errorf("ipvs: set timeouts: %w", err)
	}
	return nil
}

// explain turns the kernel's ENOENT for an unknown scheduler into words.
func explain(err error, sched string) error {
	if errors.Is(err, syscall.ENOENT) || strings.Contains(err.Error(), "no such file") {
		return fmt.Errorf("%w (is the scheduler %q available? this kernel has the ip_vs_%s module or not)", err, sched, sched)
	}
	return err
}
