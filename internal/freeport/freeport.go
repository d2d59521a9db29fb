// Package freeport gives tests loopback TCP addresses: one that nothing
// listens on (a port the system has just handed out and taken back, for
// a server the test starts later or for a peer that refuses connections),
// or one whose connections a function of the test serves.
package freeport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Addr is "127.0.0.1:PORT" with nothing listening on PORT (over TCP and
// UDP). The port is taken below the system's ephemeral range
// (net.ipv4.ip_local_port_range), which the kernel never hands to a
// connection's local end: a port from that range (what listening on
// port 0 gives) can be taken meanwhile by any outgoing connection of
// the machine, as a make test run met (an etcd member's "address already
// in use"). Another test choosing the same port at random in between is
// the race that remains, 1 in thousands.
func Addr(t testing.TB) string {
	t.Helper()
	first, _ := ephemeralRange("/proc/sys/net/ipv4/ip_local_port_range")
	for range 200 {
		port := lowestPort + rand.IntN(first-lowestPort)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		return addr
	}
	t.Fatalf("no free loopback port in [%d, %d) after 200 tries", lowestPort, first)
	return ""
}

// lowestPort is the lowest port Addr gives, above the well-known and most
// registered services' ports.
const lowestPort = 10000

// ephemeralRange reads the first port of the kernel's ephemeral range
// (32768 where it cannot be read or is too low to leave room below).
func ephemeralRange(file string) (first int, err error) {
	first = 32768
	data, err := os.ReadFile(file)
	if err != nil {
		return first, err
	}
	f := strings.Fields(string(data))
	if len(f) < 1 {
		return first, nil
	}
	if n, err := strconv.Atoi(f[0]); err == nil && n > lowestPort+1000 {
		first = n
	}
	return first, nil
}

// Serve listens on a loopback port until the test ends and serves each
// connection with serve, in a goroutine of its own, closing the
// connection when serve returns. It returns the address.
func Serve(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return l.Addr().String()
}
