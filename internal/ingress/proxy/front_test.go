package proxy

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// front serves p as the ingress's plain HTTP listener does: each
// connection on the fast path first, and with net/http's server once the
// fast path hands it over. handoffs counts the connections handed over.
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

func serveFront(t testing.TB, p *Proxy, port int) *front {
	t.Helper()
	l, f, handed, srv := listenFront(t, p, port)
	var closing atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				if rest := p.ServeConn(c, port, ConnTimeouts{Header: 10 * time.Second, Idle: 75 * time.Second}, closing.Load); rest != nil {
					f.handoffs.Add(1)
					select {
					case handed.conns <- rest:
					case <-handed.done:
						rest.Close()
					}
				}
			})
		}
	}()
	t.Cleanup(func() {
		closing.Store(true)
		l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.SetReadDeadline(time.Unix(1, 0)) // wakes those waiting for a request
		}
		mu.Unlock()
		handed.close()
		srv.Close()
		wg.Wait()
	})
	return f
}

// serveLoops serves p as the ingress's plain HTTP listener does with
// event loops (Loops): handoffs counts the connections given to
// net/http.
func serveLoops(t testing.TB, p *Proxy, port int) *front {
	t.Helper()
	f, _ := serveLoopsWith(t, p, port, ConnTimeouts{Header: 10 * time.Second, Idle: 75 * time.Second}, func() {})
	return f
}

// serveLoopsWith is serveLoops with those timeouts, calling release for
// each connection closed; the loops are returned for Shutdown (also
// called at the test's end).
func serveLoopsWith(t testing.TB, p *Proxy, port int, timeouts ConnTimeouts, release func()) (*front, *Loops) {
	t.Helper()
	l, f, handed, srv := listenFront(t, p, port)
	loops, err := p.NewLoops(port, timeouts, func(c net.Conn) {
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
			loops.Serve(c, nil, release)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		loops.Shutdown(ctx)
		handed.close()
		srv.Close()
	})
	return f, loops
}

// fronts are the two ways of serving plain HTTP/1.1: a goroutine per
// connection, and event loops.
var fronts = []struct {
	name  string
	serve func(testing.TB, *Proxy, int) *front
}{{"goroutines", serveFront}, {"loops", serveLoops}}

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
