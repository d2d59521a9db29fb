package userspace

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"
)

// dialTimeouts are the connect timeouts of successive tries, as
// kube-proxy's userspace mode had them: a dead endpoint costs a quarter
// of a second before the next one is tried, and a slow one gets more
// time on later tries.
var dialTimeouts = []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}

// maxTries bounds the endpoints tried for one connection.
const maxTries = 8

// tcpSocket accepts connections redirected to it and joins each to an
// endpoint, trying others when one cannot be reached.
type tcpSocket struct {
	l      net.Listener
	bal    *balancer
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	logger *slog.Logger
	onFail func() // a dial to an endpoint failed

	wg sync.WaitGroup
}

func (s *tcpSocket) port() int { return s.l.Addr().(*net.TCPAddr).Port }

func (s *tcpSocket) close() error { return s.l.Close() }

func (s *tcpSocket) serve() {
	for {
		c, err := s.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: back off rather than spin.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(c)
		}()
	}
}

func clientAddr(a net.Addr) netip.Addr {
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

func (s *tcpSocket) handle(c net.Conn) {
	client := clientAddr(c.RemoteAddr())
	tried := map[string]bool{}
	for i := 0; i < maxTries; i++ {
		ep, ok := s.bal.pick(client, tried)
		if !ok {
			break
		}
		tried[ep] = true
		ctx, cancel := context.WithTimeout(context.Background(), dialTimeouts[min(i, len(dialTimeouts)-1)])
		up, err := s.dial(ctx, "tcp", ep)
		cancel()
		if err != nil {
			s.logger.Info("endpoint unreachable, trying another", "endpoint", ep, "client", client.String(), "err", err)
			if s.onFail != nil {
				s.onFail()
			}
			continue
		}
		splice(c, up)
		return
	}
	// No endpoint, or none reachable: reset, so the client fails at once
	// as it would against REJECT.
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// splice copies both ways until both sides are done, passing half-closes
// on so that request-then-EOF protocols work.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, err := io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
			_ = cw.CloseWrite()
			return
		}
		// An error on one side ends both: nothing more can be relayed.
		_ = a.Close()
		_ = b.Close()
	}
	go pipe(b, a)
	go pipe(a, b)
	wg.Wait()
	_ = a.Close()
	_ = b.Close()
}
