package node

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestServingGuardTable(t *testing.T) {
	tcp := func(p int32) servedPort { return servedPort{proto: corev1.ProtocolTCP, port: p} }
	udp := func(p int32) servedPort { return servedPort{proto: corev1.ProtocolUDP, port: p} }
	cases := []struct {
		addr  string
		ports []servedPort
		want  []string
	}{
		{"10.244.1.7", []servedPort{tcp(80), tcp(8080)}, []string{
			"meta l4proto tcp tcp flags rst,ack / fin,syn,rst,ack tcp sequence 0 th sport 80 ip saddr 10.244.1.7 ip daddr != 10.244.1.7 drop",
			"meta l4proto tcp tcp flags rst,ack / fin,syn,rst,ack tcp sequence 0 th sport 8080 ip saddr 10.244.1.7 ip daddr != 10.244.1.7 drop",
		}},
		{"10.244.1.7", []servedPort{tcp(53), udp(53), udp(5353)}, []string{
			"meta l4proto tcp tcp flags rst,ack / fin,syn,rst,ack tcp sequence 0 th sport 53 ip saddr 10.244.1.7 ip daddr != 10.244.1.7 drop",
			"meta l4proto icmp icmp type destination-unreachable icmp code port-unreachable ip saddr 10.244.1.7 ip daddr != 10.244.1.7 drop",
		}},
		{"fd00:10:244::7", []servedPort{udp(53)}, []string{
			"meta l4proto ipv6-icmp icmpv6 type destination-unreachable icmpv6 code port-unreachable ip6 saddr fd00:10:244::7 ip6 daddr != fd00:10:244::7 drop",
		}},
	}
	for _, tc := range cases {
		if got := oneChainRules(t, servingGuard(netip.MustParseAddr(tc.addr), tc.ports), "output"); !slices.Equal(got, tc.want) {
			t.Errorf("%s %v: rules\n%q\nwant\n%q", tc.addr, tc.ports, got, tc.want)
		}
	}
}

// TestServingGuard: in a namespace of its own with the pod's address and
// a client's, a guard turns the pod's refusals at its served ports (TCP)
// and of UDP into silence, and nothing else: a port it does not serve
// and its own loopback traffic are refused as ever, an established
// connection goes on, and a server's reset of a connection reaches the
// client. Removed, the refusals are back; removing twice is fine.
func TestServingGuard(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root; CI runs as root")
	}
	const uid = "serving-guard-test"
	n := &PodNetwork{Prefix: fmt.Sprintf("svcnet-test-guard-%d-", os.Getpid())}
	pod, client := netip.MustParseAddr("10.255.78.7"), netip.MustParseAddr("10.255.78.8")
	ns := podNetns(t, n, uid, pod, client)
	// An echo server, and one that resets every connection it accepts.
	serveTCP(t, ns, netip.AddrPortFrom(pod, 8080).String(), false)
	serveTCP(t, ns, netip.AddrPortFrom(pod, 8081).String(), true)
	dial := func(from netip.Addr, network string, port int) error {
		return exchange(t, ns, from, network, netip.AddrPortFrom(pod, uint16(port)).String())
	}
	reset := func(err error) bool { return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) }
	const servedTCP, unservedTCP, servedUDP = 9, 10, 53

	if err := dial(client, "tcp", servedTCP); !isRefused(err) {
		t.Fatalf("TCP to a closed served port before the guard: %v, want refused", err)
	}
	if err := dial(client, "udp", servedUDP); !isRefused(err) {
		t.Fatalf("UDP to a closed served port before the guard: %v, want refused", err)
	}
	established, err := dialFrom(t.Context(), ns, client, "tcp", netip.AddrPortFrom(pod, 8080).String())
	if err != nil {
		t.Fatal(err)
	}
	defer established.Close()

	ports := []servedPort{{corev1.ProtocolTCP, servedTCP}, {corev1.ProtocolTCP, 8080}, {corev1.ProtocolTCP, 8081}, {corev1.ProtocolUDP, servedUDP}}
	for range 2 {
		if err := n.Guard(uid, pod, ports); err != nil {
			t.Fatal(err)
		}
	}
	if err := dial(client, "tcp", servedTCP); !isSilent(err) {
		t.Errorf("TCP to a closed served port, guarded: %v, want no answer", err)
	}
	if err := dial(client, "udp", servedUDP); !isSilent(err) {
		t.Errorf("UDP to a closed port, guarded: %v, want no answer", err)
	}
	if err := dial(client, "tcp", unservedTCP); !isRefused(err) {
		t.Errorf("TCP to a port no Service sends to, guarded: %v, want refused", err)
	}
	if err := dial(pod, "tcp", servedTCP); !isRefused(err) {
		t.Errorf("the pod's own connection to its closed port, guarded: %v, want refused", err)
	}
	if err := dial(client, "tcp", 8080); err != nil {
		t.Errorf("a new connection to the served listener, guarded: %v", err)
	}
	if err := dial(client, "tcp", 8081); !reset(err) {
		t.Errorf("a connection the server resets, guarded: %v, want reset", err)
	}
	if err := echoes(established); err != nil {
		t.Errorf("a connection established before the guard: %v, want it to go on", err)
	}

	// Fewer ports: the guard is replaced, not added to.
	if err := n.Guard(uid, pod, ports[1:2]); err != nil {
		t.Fatal(err)
	}
	if err := dial(client, "tcp", servedTCP); !isRefused(err) {
		t.Errorf("TCP to a port no longer served: %v, want refused", err)
	}

	for range 2 {
		if err := n.Unguard(uid, pod); err != nil {
			t.Fatal(err)
		}
	}
	if err := dial(client, "udp", servedUDP); !isRefused(err) {
		t.Errorf("UDP to a closed port after the guard: %v, want refused", err)
	}
}
