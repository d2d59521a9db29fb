package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/svcnet/svcnet/internal/netns"
	nft "github.com/svcnet/svcnet/internal/nftables"
)

func TestCrashHoldTable(t *testing.T) {
	cases := []struct {
		addr string
		want []string
	}{
		{"10.244.1.7", []string{"ip daddr 10.244.1.7 meta l4proto tcp tcp flags syn / syn,ack drop", "ip daddr 10.244.1.7 meta l4proto udp ct state new drop"}},
		{"fd00:10:244::7", []string{"ip6 daddr fd00:10:244::7 meta l4proto tcp tcp flags syn / syn,ack drop", "ip6 daddr fd00:10:244::7 meta l4proto udp ct state new drop"}},
	}
	for _, tc := range cases {
		if got := oneChainRules(t, crashHold(netip.MustParseAddr(tc.addr)), "input"); !slices.Equal(got, tc.want) {
			t.Errorf("%s: rules\n%q\nwant\n%q", tc.addr, got, tc.want)
		}
	}
}

// oneChainRules are the rules of tbl's one chain, which must be a
// filter chain at hook, as nft writes them.
func oneChainRules(t *testing.T, tbl *nft.Table, hook string) []string {
	t.Helper()
	if len(tbl.Chains) != 1 {
		t.Fatalf("want one chain, got\n%s", tbl.Format())
	}
	if h := tbl.Chains[0].Hook; h == nil || h.Hook != hook || h.Type != "filter" {
		t.Errorf("hook %+v, want the filter %s hook", h, hook)
	}
	var got []string
	for _, r := range tbl.Chains[0].Rules {
		got = append(got, r.Format(tbl.Family))
	}
	return got
}

// podNetns makes the network namespace of n's pod uid with addrs on its
// loopback, deleted when the test ends.
func podNetns(t *testing.T, n *PodNetwork, uid string, addrs ...netip.Addr) string {
	t.Helper()
	ns := n.Netns(uid)
	if err := netns.Create(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Delete(ns) })
	h, err := netns.Handle(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if err := h.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}}); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}

// dialFrom connects from inside ns, from the local address from (any,
// if not valid), to target.
func dialFrom(ctx context.Context, ns string, from netip.Addr, network, target string) (net.Conn, error) {
	var c net.Conn
	err := netns.Do(ns, func() (err error) {
		var d net.Dialer
		if from.IsValid() {
			d.LocalAddr = &net.TCPAddr{IP: from.AsSlice()}
			if network == "udp" {
				d.LocalAddr = &net.UDPAddr{IP: from.AsSlice()}
			}
		}
		c, err = d.DialContext(ctx, network, target)
		return err
	})
	return c, err
}

// exchange sends a byte to target from inside ns (as dialFrom) and reads
// one, within 500 ms: nil when answered, else why not.
func exchange(t *testing.T, ns string, from netip.Addr, network, target string) error {
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	c, err := dialFrom(ctx, ns, from, network, target)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("?")); err != nil {
		return err
	}
	_, err = c.Read(make([]byte, 1))
	return err
}

// echoes sends a byte on c and reads it back, within 2 s.
func echoes(c net.Conn) error {
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("x")); err != nil {
		return err
	}
	_, err := c.Read(make([]byte, 1))
	return err
}

// isRefused and isSilent tell a refusal from no answer at all.
func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

func isSilent(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// serveTCP listens at addr in ns until the test ends: it echoes what
// each connection sends, or with reset resets each connection at once.
func serveTCP(t *testing.T, ns, addr string, reset bool) {
	t.Helper()
	ln, err := netns.Listen(ns, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if reset {
				_ = c.(*net.TCPConn).SetLinger(0)
				c.Close()
				continue
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
}

// TestCrashHold: in a namespace of its own with the pod's address, a
// hold turns the refusal of a port nobody listens on (TCP and UDP) into
// silence, lets an established connection and loopback traffic go on,
// and ends as if it had never been; ending one that is not there is
// fine, and so is holding twice.
func TestCrashHold(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root; CI runs as root")
	}
	const uid = "crash-hold-test"
	n := &PodNetwork{Prefix: fmt.Sprintf("svcnet-test-hold-%d-", os.Getpid())}
	addr := netip.MustParseAddr("10.255.77.7")
	ns := podNetns(t, n, uid, addr)
	serveTCP(t, ns, addr.String()+":8080", false)
	dial := func(network, target string) error { return exchange(t, ns, netip.Addr{}, network, target) }
	closedTCP, closedUDP := addr.String()+":9", addr.String()+":53"

	// Before: refused at once.
	if err := dial("tcp", closedTCP); !isRefused(err) {
		t.Fatalf("TCP to a closed port before the hold: %v, want refused", err)
	}
	if err := dial("udp", closedUDP); !isRefused(err) {
		t.Fatalf("UDP to a closed port before the hold: %v, want refused", err)
	}
	established, err := netns.DialContext(t.Context(), ns, "tcp", addr.String()+":8080")
	if err != nil {
		t.Fatal(err)
	}
	defer established.Close()

	for range 2 {
		if err := n.Hold(uid, addr); err != nil {
			t.Fatal(err)
		}
	}
	if err := dial("tcp", closedTCP); !isSilent(err) {
		t.Errorf("TCP to a closed port during the hold: %v, want no answer", err)
	}
	if err := dial("udp", closedUDP); !isSilent(err) {
		t.Errorf("UDP to a closed port during the hold: %v, want no answer", err)
	}
	if err := dial("tcp", addr.String()+":8080"); !isSilent(err) {
		t.Errorf("a new connection to a listener during the hold: %v, want no answer", err)
	}
	// Its first segments since the hold began: conntrack, which the
	// hold's UDP rule turned on in the namespace, sees them as a new
	// connection, and only a SYN may be held.
	if err := echoes(established); err != nil {
		t.Errorf("a connection established before the hold: %v, want it to go on", err)
	}
	if err := dial("tcp", "127.0.0.1:9"); !isRefused(err) {
		t.Errorf("loopback during the hold: %v, want refused as ever", err)
	}

	for range 2 {
		if err := n.Unhold(uid, addr); err != nil {
			t.Fatal(err)
		}
	}
	if err := dial("tcp", closedTCP); !isRefused(err) {
		t.Errorf("TCP to a closed port after the hold: %v, want refused", err)
	}
	if err := dial("udp", closedUDP); !isRefused(err) {
		t.Errorf("UDP to a closed port after the hold: %v, want refused", err)
	}
}
