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
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// Interface is every effect the cleanup has on the kernel. Exec runs the
// conntrack tool; Fake records what it was asked.
type Interface interface {
	// ClearEntriesForIP deletes the entries of proto whose original
	// destination is ip: traffic sent to a service address before the
	// rules could DNAT it.
	ClearEntriesForIP(ctx context.Context, ip netip.Addr, proto v1.Protocol) error
	// ClearEntriesForPort deletes the entries of proto whose original
	// destination port is port: the same, for a node port.
	ClearEntriesForPort(ctx context.Context, port int, family v1.IPFamily, proto v1.Protocol) error
	// ClearEntriesForNAT deletes the entries of proto sent to origin (a
	// service address) and DNATed to dest (an endpoint); for TCP only
	// those in state SYN_SENT.
	ClearEntriesForNAT(ctx context.Context, origin, dest netip.Addr, proto v1.Protocol) error
	// ClearEntriesForPortNAT deletes the entries of proto sent to node
	// port port and DNATed to dest; for TCP only those in state
	// SYN_SENT.
	ClearEntriesForPortNAT(ctx context.Context, dest netip.Addr, port int, proto v1.Protocol) error
}

// Exec runs `conntrack -D` in the network namespace of the process, the
// one whose rules the proxy programs.
type Exec struct {
	// Binary defaults to "conntrack".
	Binary string
	// Netns, if set, runs the tool in that named namespace instead.
	Netns string
}

func (e *Exec) delete(ctx context.Context, family v1.IPFamily, proto v1.Protocol, filter ...string) error {
	bin := e.Binary
	if bin == "" {
		bin = "conntrack"
	}
	args := append([]string{"-D", "-p", strings.ToLower(string(proto))}, filter...)
	if family == v1.IPv6Protocol {
		args = append(args, "-f", "ipv6")
	}
	name := bin
	if e.Netns != "" {
		name, args = "ip", append([]string{"netns", "exec", e.Netns, bin}, args...)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	// conntrack exits 1 when nothing matched, which is no failure here.
	if err != nil && !strings.Contains(out.String(), "0 flow entries have been deleted") {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

func familyOf(a netip.Addr) v1.IPFamily {
	if a.Is4() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

// ClearEntriesForIP implements Interface.
func (e *Exec) ClearEntriesForIP(ctx context.Context, ip netip.Addr, proto v1.Protocol) error {
	return e.delete(ctx, familyOf(ip), proto, "--orig-dst", ip.String())
}

// ClearEntriesForPort implements Interface.
func (e *Exec) ClearEntriesForPort(ctx context.Context, port int, family v1.IPFamily, proto v1.Protocol) error {
	return e.delete(ctx, family, proto, "--dport", strconv.Itoa(port))
}

// ClearEntriesForNAT implements Interface.
func (e *Exec) ClearEntriesForNAT(ctx context.Context, origin, dest netip.Addr, proto v1.Protocol) error {
	return e.delete(ctx, familyOf(origin), proto, append(unanswered(proto), "--orig-dst", origin.String(), "--dst-nat", dest.String())...)
}

// ClearEntriesForPortNAT implements Interface.
func (e *Exec) ClearEntriesForPortNAT(ctx context.Context, dest netip.Addr, port int, proto v1.Protocol) error {
	return e.delete(ctx, familyOf(dest), proto, append(unanswered(proto), "--dport", strconv.Itoa(port), "--dst-nat", dest.String())...)
}

// unanswered narrows a TCP deletion to the connections that never got
// an answer.
func unanswered(proto v1.Protocol) []string {
	if proto == v1.ProtocolTCP {
		return []string{"--state", "SYN_SENT"}
	}
	return nil
}

// Fake records calls as strings such as "nat udp 10.96.0.10 -> 10.244.1.2".
type Fake struct {
	mu    sync.Mutex
	calls []string
	// Err, if set, is returned by every call (after recording it).
	Err error
}

func (f *Fake) record(s string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
	return f.Err
}

// Calls returns the calls so far, sorted, and forgets them.
func (f *Fake) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Sorted(slices.Values(f.calls))
	f.calls = nil
	return out
}

// ClearEntriesForIP implements Interface.
func (f *Fake) ClearEntriesForIP(_ context.Context, ip netip.Addr, proto v1.Protocol) error {
	return f.record(fmt.Sprintf("ip %s %s", lower(proto), ip))
}

// ClearEntriesForPort implements Interface.
func (f *Fake) ClearEntriesForPort(_ context.Context, port int, family v1.IPFamily, proto v1.Protocol) error {
	return f.record(fmt.Sprintf("port %s %s %d", lower(proto), family, port))
}

// ClearEntriesForNAT implements Interface.
func (f *Fake) ClearEntriesForNAT(_ context.Context, origin, dest netip.Addr, proto v1.Protocol) error {
	return f.record(fmt.Sprintf("nat %s %s -> %s", lower(proto), origin, dest))
}

// ClearEntriesForPortNAT implements Interface.
func (f *Fake) ClearEntriesForPortNAT(_ context.Context, dest netip.Addr, port int, proto v1.Protocol) error {
	return f.record(fmt.Sprintf("portnat %s %d -> %s", lower(proto), port, dest))
}

func lower(p v1.Protocol) string { return strings.ToLower(string(p)) }

// errs joins errors, keeping at most a few so a log line stays readable.
func errs(list []error) error {
	if len(list) > 5 {
		list = append(list[:5], fmt.Errorf("and %d more", len(list)-5))
	}
	return errors.Join(list...)
}
