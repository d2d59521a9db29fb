package proxy

import (
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

func serveFront(t *testing.T, p *Proxy, port int) *front {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &front{addr: l.Addr().String()}
	handed := &chanListener{addr: l.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{Handler: p.Handler(port), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 32 << 10}
	go srv.Serve(handed)
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
