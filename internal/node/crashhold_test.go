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
		tbl := crashHold(netip.MustParseAddr(tc.addr))
		if len(tbl.Chains) != 1 {
			t.Fatalf("%s: want one chain, got\n%s", tc.addr, tbl.Format())
		}
		var got []string
		for _, r := range tbl.Chains[0].Rules {
			got = append(got, r.Format(tbl.Family))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: rules\n%q\nwant\n%q", tc.addr, got, tc.want)
		}
		if h := tbl.Chains[0].Hook; h == nil || h.Hook != "input" || h.Type != "filter" {
			t.Errorf("%s: hook %+v, want the filter input hook", tc.addr, h)
		}
	}
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
	ns := n.Netns(uid)
	if err := netns.Create(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Delete(ns) })
	addr := netip.MustParseAddr("10.255.77.7")
	h, err := netns.Handle(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(32, 32)}}); err != nil {
		t.Fatal(err)
	}
	ln, err := netns.Listen(ns, "tcp", addr.String()+":8080")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	dial := func(network, target string) error {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		c, err := netns.DialContext(ctx, ns, network, target)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
		if network == "udp" {
			if _, err := c.Write([]byte("?")); err != nil {
				return err
			}
		}
		_, err = c.Read(make([]byte, 1))
		return err
	}
	refused := func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
	silent := func(err error) bool {
		var ne net.Error
		return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
	}
	closedTCP, closedUDP := addr.String()+":9", addr.String()+":53"

	// Before: refused at once.
	if err := dial("tcp", closedTCP); !refused(err) {
		t.Fatalf("TCP to a closed port before the hold: %v, want refused", err)
	}
	if err := dial("udp", closedUDP); !refused(err) {
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
	if err := dial("tcp", closedTCP); !silent(err) {
		t.Errorf("TCP to a closed port during the hold: %v, want no answer", err)
	}
	if err := dial("udp", closedUDP); !silent(err) {
		t.Errorf("UDP to a closed port during the hold: %v, want no answer", err)
	}
	if err := dial("tcp", addr.String()+":8080"); !silent(err) {
		t.Errorf("a new connection to a listener during the hold: %v, want no answer", err)
	}
	// Its first segments since the hold began: conntrack, which the
	// hold's UDP rule turned on in the namespace, sees them as a new
	// connection, and only a SYN may be held.
	_ = established.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := established.Write([]byte("x")); err != nil {
		t.Errorf("a connection established before the hold: %v, want it to go on", err)
	} else if _, err := established.Read(make([]byte, 1)); err != nil {
		t.Errorf("a connection established before the hold: %v, want it to go on", err)
	}
	if err := dial("tcp", "127.0.0.1:9"); !refused(err) {
		t.Errorf("loopback during the hold: %v, want refused as ever", err)
	}

	for range 2 {
		if err := n.Unhold(uid, addr); err != nil {
			t.Fatal(err)
		}
	}
	if err := dial("tcp", closedTCP); !refused(err) {
		t.Errorf("TCP to a closed port after the hold: %v, want refused", err)
	}
	if err := dial("udp", closedUDP); !refused(err) {
		t.Errorf("UDP to a closed port after the hold: %v, want refused", err)
	}
}
