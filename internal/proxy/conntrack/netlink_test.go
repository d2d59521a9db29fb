package conntrack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/netns"
)

// entry is a conntrack entry as the test writes it: a client's packet
// to dst:dport, DNATed to the endpoint natTo:natPort (natTo unset: not
// DNATed), in TCP state tcpState.
type entry struct {
	proto    uint8
	dst      string
	dport    uint16
	natTo    string
	natPort  uint16
	tcpState uint8
}

func (e entry) String() string {
	return fmt.Sprintf("%d %s:%d -> %s:%d state %d", e.proto, e.dst, e.dport, e.natTo, e.natPort, e.tcpState)
}

func (e entry) flow(sport uint16) *netlink.ConntrackFlow {
	dest, port := e.natTo, e.natPort
	if dest == "" {
		dest, port = e.dst, e.dport
	}
	f := &netlink.ConntrackFlow{FamilyType: unix.AF_INET, TimeOut: 100,
		Forward: netlink.IPTuple{Protocol: e.proto, SrcIP: net.ParseIP("10.244.9.9").To4(), SrcPort: sport, DstIP: net.ParseIP(e.dst).To4(), DstPort: e.dport},
		Reverse: netlink.IPTuple{Protocol: e.proto, SrcIP: net.ParseIP(dest).To4(), SrcPort: port, DstIP: net.ParseIP("10.244.9.9").To4(), DstPort: sport}}
	if e.proto == unix.IPPROTO_TCP {
		f.ProtoInfo = &netlink.ProtoInfoTCP{State: e.tcpState}
	}
	return f
}

const (
	tcp         = unix.IPPROTO_TCP
	udp         = unix.IPPROTO_UDP
	synSent     = 1
	established = 3
)

// The entries of cleanupCases' table, and which of them cleanup deletes.
var (
	cleanup = Cleanup{
		IPs:      []netip.Addr{netip.MustParseAddr("10.96.0.53")},
		Ports:    []int{30053},
		NATs:     []NAT{{v1.ProtocolUDP, netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("10.244.2.2")}, {v1.ProtocolTCP, netip.MustParseAddr("10.96.0.20"), netip.MustParseAddr("10.244.1.2")}},
		PortNATs: []PortNAT{{v1.ProtocolTCP, 30080, netip.MustParseAddr("10.244.1.2")}},
	}
	cleanupCases = []struct {
		name string
		e    entry
		gone bool
	}{
		{"UDP to a service address that got its first endpoint", entry{proto: udp, dst: "10.96.0.53", dport: 53}, true},
		{"TCP to that address (a SYN without endpoints leaves none)", entry{proto: tcp, dst: "10.96.0.53", dport: 53, tcpState: synSent}, false},
		{"UDP to a node port that got its first endpoint", entry{proto: udp, dst: "172.18.0.11", dport: 30053}, true},
		{"UDP DNATed to a removed endpoint", entry{proto: udp, dst: "10.96.0.10", dport: 53, natTo: "10.244.2.2", natPort: 5353}, true},
		{"UDP DNATed to an endpoint that stays", entry{proto: udp, dst: "10.96.0.10", dport: 53, natTo: "10.244.1.2", natPort: 5353}, false},
		{"TCP unanswered, DNATed to a removed endpoint", entry{proto: tcp, dst: "10.96.0.20", dport: 80, natTo: "10.244.1.2", natPort: 8080, tcpState: synSent}, true},
		{"TCP answered, DNATed to a removed endpoint", entry{proto: tcp, dst: "10.96.0.20", dport: 80, natTo: "10.244.1.2", natPort: 8080, tcpState: established}, false},
		{"TCP unanswered through a node port to a removed endpoint", entry{proto: tcp, dst: "172.18.0.11", dport: 30080, natTo: "10.244.1.2", natPort: 8080, tcpState: synSent}, true},
		{"TCP unanswered through that node port to another endpoint", entry{proto: tcp, dst: "172.18.0.11", dport: 30080, natTo: "10.244.1.3", natPort: 8080, tcpState: synSent}, false},
		{"UDP DNATed to the removed TCP endpoint", entry{proto: udp, dst: "10.96.0.20", dport: 80, natTo: "10.244.1.2", natPort: 8080}, false},
	}
)

func TestMatcher(t *testing.T) {
	m := cleanup.matcher()
	for i, tc := range cleanupCases {
		if got := m.MatchConntrackFlow(tc.e.flow(uint16(40000 + i))); got != tc.gone {
			t.Errorf("%s: matched %v, want %v", tc.name, got, tc.gone)
		}
	}
}

// TestNetlinkDelete writes the cases' entries into the conntrack table
// of a namespace of its own and deletes the cleanup's in one pass:
// exactly the stale ones go.
func TestNetlinkDelete(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root; CI runs as root")
	}
	ns := fmt.Sprintf("svcnet-test-ct-%d", os.Getpid())
	if err := netns.Create(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Delete(ns) })
	h, err := netns.Handle(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for i, tc := range cleanupCases {
		if err := h.ConntrackCreate(netlink.ConntrackTable, unix.AF_INET, tc.e.flow(uint16(40000+i))); err != nil {
			t.Fatalf("create %s: %v", tc.e, err)
		}
	}
	n := &Netlink{Handle: h}
	deleted, err := n.Delete(context.Background(), cleanup, v1.IPv4Protocol)
	if err != nil {
		t.Fatal(err)
	}
	flows, err := h.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	var left []uint16
	for _, f := range flows {
		left = append(left, f.Forward.SrcPort)
	}
	wantDeleted := 0
	for i, tc := range cleanupCases {
		kept := slices.Contains(left, uint16(40000+i))
		if kept == tc.gone {
			t.Errorf("%s: kept %v, want gone %v", tc.name, kept, tc.gone)
		}
		if tc.gone {
			wantDeleted++
		}
	}
	if deleted != wantDeleted {
		t.Errorf("deleted %d, want %d", deleted, wantDeleted)
	}
	if deleted, err := n.Delete(context.Background(), Cleanup{}, v1.IPv4Protocol); deleted != 0 || err != nil {
		t.Errorf("an empty cleanup: %d deleted, %v", deleted, err)
	}
}
