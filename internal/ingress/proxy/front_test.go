package proxy

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/ingress/engine"
)

// front serves p as the ingress's plain HTTP listener does: each
// connection on the engine first, and with net/http's server once the
// engine hands it over. handoffs counts the connections handed over.
type front struct {
	addr     string
	handoffs atomic.Int32
}

// listenFront is a front's listener, and net/http's server for what is
// handed to it, as the ingress's.
func listenFront(t testing.TB, p *Proxy, port int) (net.Listener, *front, *chanListener, *http.Server) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	handed := &chanListener{addr: l.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{Handler: p.Handler(port), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 32 << 10}
	go srv.Serve(handed)
	return l, &front{addr: l.Addr().String()}, handed, srv
}

// serveEngine serves p as the ingress's plain HTTP listener does, with
// the engine: handoffs counts the connections given to net/http.
func serveEngine(t testing.TB, p *Proxy, port int) *front {
	t.Helper()
	f, _ := serveEngineWith(t, p, port, 10*time.Second, 75*time.Second, func() {})
	return f
}

// serveEngineWith is serveEngine with those header and idle timeouts,
// calling release for each connection closed; the engine is returned for
// Shutdown (also called at the test's end).
func serveEngineWith(t testing.TB, p *Proxy, port int, header, idle time.Duration, release func()) (*front, *engine.Engine) {
	t.Helper()
	l, f, handed, srv := listenFront(t, p, port)
	eng, err := p.NewEngine(port, header, idle, func(c net.Conn) {
		f.handoffs.Add(1)
		go func() {
			select {
			case handed.conns <- c:
			case <-handed.done:
				c.Close()
			}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			eng.Serve(c, nil, release)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		eng.Shutdown(ctx)
		handed.close()
		srv.Close()
	})
	return f, eng
}

// serveNetHTTP serves p with net/http's server alone.
func serveNetHTTP(t testing.TB, p *Proxy, port int) *front {
	t.Helper()
	srv := httptest.NewUnstartedServer(p.Handler(port))
	srv.Config.MaxHeaderBytes = 32 << 10 // as the ingress's
	srv.Start()
	t.Cleanup(srv.Close)
	return &front{addr: srv.Listener.Addr().String()}
}

// fronts are the two ways of serving plain HTTP/1.1, for benchmarks.
var fronts = []struct {
	name  string
	serve func(testing.TB, *Proxy, int) *front
}{{"net/http", serveNetHTTP}, {"engine", serveEngine}}

type chanListener struct {
	addr  net.Addr
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) close()         { l.once.Do(func() { close(l.done) }) }
func (l *chanListener) Close() error   { l.close(); return nil }
func (l *chanListener) Addr() net.Addr { return l.addr }

// dialFront connects to a front at addr, closed when the test ends; with
// d, the connection's reads and writes fail after d.
func dialFront(t testing.TB, addr string, d time.Duration) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if d > 0 {
		_ = c.SetDeadline(time.Now().Add(d))
	}
	return c
}
