// Package freeport gives tests loopback addresses: one that nothing
// listens on (for a server the test starts later or for a peer that
// refuses connections), or one whose connections a function of the test
// serves.
package freeport

import (
	"net"
	"strconv"
	"testing"

	"github.com/svcnet/svcnet/internal/portpick"
)

// Addr is "127.0.0.1:PORT" with nothing listening on PORT (over TCP and
// UDP), a port of portpick.Loopback: below the ephemeral range, so that
// no outgoing connection of the machine takes it before the test binds
// it.
func Addr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Port(t)))
}

// Port is the port of an Addr, for a server configured by port alone.
func Port(t testing.TB) int {
	t.Helper()
	port, err := portpick.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return port
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
