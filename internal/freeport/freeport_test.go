package freeport

import (
	"io"
	"net"
	"strconv"
	"testing"
)

func TestServe(t *testing.T) {
	addr := Serve(t, func(c net.Conn) { _, _ = io.WriteString(c, "hello") })
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		// The server closes the connection after serving it: ReadAll ends.
		b, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(b) != "hello" {
			t.Fatalf("read %q, %v", b, err)
		}
	}
}

// TestAddr: a port below the ephemeral range, free for TCP and UDP, and
// not the same twice in a row (it is chosen at random).
func TestAddr(t *testing.T) {
	first, _ := ephemeralRange("/proc/sys/net/ipv4/ip_local_port_range")
	seen := map[string]bool{}
	for range 20 {
		addr := Addr(t)
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		if port < lowestPort || port >= first {
			t.Fatalf("port %d outside [%d, %d)", port, lowestPort, first)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is not free: %v", addr, err)
		}
		l.Close()
		seen[addr] = true
	}
	if len(seen) < 15 {
		t.Errorf("20 addresses, only %d distinct: %v", len(seen), seen)
	}
}
