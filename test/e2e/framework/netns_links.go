package framework

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
)

// Veth links two namespaces with a veth pair: aName (address aAddr, a
// CIDR, or "" for none) in a and bName in b. The pair is made inside a
// and its peer moved straight into b, so it never exists in the host's
// namespace; it goes away with either namespace.
func Veth(a *Netns, aName, aAddr string, b *Netns, bName, bAddr string) {
	a.t.Helper()
	a.IP("link", "add", aName, "type", "veth", "peer", "name", bName, "netns", b.Name)
	for _, end := range []struct {
		ns         *Netns
		name, addr string
	}{{a, aName, aAddr}, {b, bName, bAddr}} {
		if end.addr != "" {
			end.ns.IP("addr", "add", end.addr, "dev", end.name)
		}
		end.ns.IP("link", "set", end.name, "up")
	}
}

// Bridge makes a bridge with address addr (a CIDR) in n.
func (n *Netns) Bridge(name, addr string) {
	n.t.Helper()
	n.IP("link", "add", name, "type", "bridge")
	n.IP("addr", "add", addr, "dev", name)
	n.IP("link", "set", name, "up")
}

// Attach puts link (in n) on bridge (in n).
func (n *Netns) Attach(link, bridge string) {
	n.t.Helper()
	n.IP("link", "set", link, "master", bridge)
}

// Forward accepts connections on listenAddr inside n and connects each
// one to dialAddr in the namespace the test process runs in, which must
// be loopback there. It lets a process in n reach a server of the test
// (an API server on 127.0.0.1) without an address, route or forwarding
// rule anywhere: both ends are loopback sockets, joined in user space.
// It stops when the test ends.
func (n *Netns) Forward(listenAddr, dialAddr string) {
	n.t.Helper()
	if host, _, err := net.SplitHostPort(dialAddr); err != nil || !net.ParseIP(host).IsLoopback() {
		n.t.Fatalf("Forward: %s is not a loopback address", dialAddr)
	}
	l := n.Listen("tcp", listenAddr)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	n.t.Cleanup(func() { cancel(); _ = l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				splice(ctx, c, dialAddr)
			}()
		}
	}()
}

func splice(ctx context.Context, c net.Conn, dialAddr string) {
	defer c.Close()
	var d net.Dialer
	up, err := d.DialContext(ctx, "tcp", dialAddr)
	if err != nil {
		return
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.Close(); _ = up.Close() })
	defer stop()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

// ForwardAPIServer makes s reachable inside n at the same address as in
// the test's namespace (https://127.0.0.1:PORT), so that s's kubeconfigs
// work unchanged for a process that runs in n.
func (n *Netns) ForwardAPIServer(s *APIServer) {
	n.t.Helper()
	hostPort := strings.TrimPrefix(s.URL, "https://")
	n.Forward(hostPort, hostPort)
}
