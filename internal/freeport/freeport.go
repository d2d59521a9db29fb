// Package freeport gives tests loopback TCP addresses: one that nothing
// listens on (a port the system has just handed out and taken back, for
// a server the test starts later or for a peer that refuses connections),
// or one whose connections a function of the test serves.
package freeport

import (
	"net"
	"testing"
)

// Addr is "127.0.0.1:PORT" with nothing listening on PORT (over TCP,
// and over UDP as far as the system's choice goes). Another process may
// take the port in the meantime; tests live with that race, as they do
// with any port.
func Addr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
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
