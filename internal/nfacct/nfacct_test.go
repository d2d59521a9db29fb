package nfacct

import (
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// TestCounter creates a counter in a namespace of the test's own, counts
// packets into it with an iptables rule, and reads them back.
func TestCounter(t *testing.T) {
	ns := netnstest.New(t, "nfacct")
	const name = "svcnet-test-pkts"
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	err := netns.Do(ns, func() error {
		if _, _, err := Get(name); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get of a missing counter: %v, want ErrNotFound", err)
		}
		for range 2 { // the second finds it there
			if err := Ensure(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rule := []string{"netns", "exec", ns, "iptables", "-A", "OUTPUT", "-o", "lo", "-p", "udp", "--dport", "9", "-m", "nfacct", "--nfacct-name", name}
	if out, err := exec.Command("ip", rule...).CombinedOutput(); err != nil {
		t.Fatalf("iptables -m nfacct: %v: %s", err, out)
	}
	if out, err := exec.Command("ip", "netns", "exec", ns, "iptables-save").CombinedOutput(); err != nil || !strings.Contains(string(out), "--nfacct-name  "+name) {
		t.Fatalf("iptables-save lacks the rule (%v):\n%s", err, out)
	}
	err = netns.Do(ns, func() error {
		// Unconnected: the port's ICMP refusals fail no later write.
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer c.Close()
		dst := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}
		for range 3 {
			if _, err := c.WriteTo([]byte("x"), dst); err != nil {
				return err
			}
		}
		pkts, bytes, err := Get(name)
		if err != nil {
			return err
		}
		if pkts != 3 || bytes != 3*(20+8+1) {
			t.Errorf("counter: %d packets, %d bytes; want 3, %d", pkts, bytes, 3*(20+8+1))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNames(t *testing.T) {
	for _, name := range []string{"", strings.Repeat("x", MaxNameLen+1)} {
		if err := Ensure(name); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("Ensure(%q): %v, want a name error", name, err)
		}
	}
}
