package userspace

import (
	"context"
	"net"
	"strconv"
)

// Sockets is every socket the userspace mode opens: the proxy sockets
// that iptables redirects service traffic to, and the connections to
// endpoints. Real uses the network namespace the proxy runs in; tests
// use loopback, or wrap Real to make endpoints fail.
type Sockets interface {
	// ListenTCP and ListenUDP open a proxy socket on port (0: any free
	// one).
	ListenTCP(port int) (net.Listener, error)
	ListenUDP(port int) (net.PacketConn, error)
	// DialContext connects to an endpoint.
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// Real opens sockets in the process's network namespace.
type Real struct {
	// ListenIP is the address proxy sockets listen on; empty means all,
	// which REDIRECT needs: it delivers to the address of the interface
	// the packet came in on, or to loopback for the node's own traffic.
	ListenIP string
}

func (r Real) addr(port int) string { return net.JoinHostPort(r.ListenIP, strconv.Itoa(port)) }

// ListenTCP implements Sockets.
func (r Real) ListenTCP(port int) (net.Listener, error) { return net.Listen("tcp", r.addr(port)) }

// ListenUDP implements Sockets.
func (r Real) ListenUDP(port int) (net.PacketConn, error) {
	return net.ListenPacket("udp", r.addr(port))
}

// DialContext implements Sockets.
func (Real) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}
