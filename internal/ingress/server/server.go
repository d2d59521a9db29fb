package controller

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcnet/svcnet/internal/ingress/proxy"
)

// fastServer serves a plain HTTP listener with the proxy's HTTP/1.1 fast
// path; a connection with a request the fast path leaves to net/http is
// handed, with its unread bytes, to net/http's server through handed, and
// stays there.
type fastServer struct {
	l      net.Listener
	px     *proxy.Proxy
	port   int
	t      proxy.ConnTimeouts
	handed *handedListener
	// loops serve the plain TCP connections (all but those h2c sniffed);
	// nil if the kernel would not give epoll sets: then goroutines do.
	loops *proxy.Loops

	closing atomic.Bool
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

func newFastServer(px *proxy.Proxy, l net.Listener, port int, t proxy.ConnTimeouts) *fastServer {
	s := &fastServer{l: l, px: px, port: port, t: t, conns: map[net.Conn]struct{}{},
		handed: &handedListener{addr: l.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}}
	// A loop must not wait for net/http's Accept.
	s.loops, _ = px.NewLoops(port, t, func(c net.Conn) { go s.handed.put(c) })
	return s
}

// loopable is the TCP connection under c for a loop, the bytes read
// from it ahead (h2c's sniffing) and what gives its slot in the
// connection limit back; ok false for any other kind of connection,
// which stays on a goroutine.
func loopable(c net.Conn) (raw net.Conn, pending []byte, release func(), ok bool) {
	if rc, ok := c.(*replayConn); ok {
		c, pending = rc.Conn, rc.pending
	}
	switch c := c.(type) {
	case *net.TCPConn:
		return c, pending, func() {}, true
	case *countedConn:
		if tc, ok := c.Conn.(*net.TCPConn); ok {
			return tc, pending, c.releaseSlot, true
		}
	}
	return nil, nil, nil, false
}

// serve accepts the listener's connections until it fails or is closed,
// waiting out temporary failures as net/http's Serve does; then handed
// closes too.
func (s *fastServer) serve() error {
	defer s.handed.Close()
	var wait time.Duration
	for {
		c, err := s.l.Accept()
		if err != nil {
			if temporary(err) && backoff(&wait, nil) {
				continue
			}
			return err
		}
		wait = 0
		if over(c) {
			go s.handed.put(c) // net/http answers it 503
			continue
		}
		if s.closing.Load() {
			c.Close()
			continue
		}
		if raw, pending, release, ok := loopable(c); ok && s.loops != nil {
			s.loops.Serve(raw, pending, release)
			continue
		}
		s.mu.Lock()
		if s.closing.Load() {
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

func (s *fastServer) serveConn(c net.Conn) {
	defer s.wg.Done()
	rest := s.px.ServeConn(c, s.port, s.t, s.closing.Load)
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	if rest != nil {
		s.handed.put(rest)
	}
}

// shutdown ends the connections as net/http's Shutdown does: those
// waiting for a request at once (a read deadline in the past wakes them),
// those in a request after its answer; ctx bounds the wait, then the rest
// are closed.
func (s *fastServer) shutdown(ctx context.Context) {
	s.l.Close()
	if s.loops != nil {
		// Beside the goroutines' wait, each with the whole grace.
		loopsDone := make(chan struct{})
		go func() { s.loops.Shutdown(ctx); close(loopsDone) }()
		defer func() { <-loopsDone }()
	}
	s.mu.Lock()
	s.closing.Store(true)
	for c := range s.conns {
		_ = c.SetReadDeadline(time.Unix(1, 0))
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
	}
}

// over reports whether c is beyond the connection limit.
func over(c net.Conn) bool {
	cc, ok := unwrap(c).(*countedConn)
	return ok && cc.over
}

// unwrap finds the accepted connection under TLS and replayed bytes.
func unwrap(c net.Conn) net.Conn {
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return c
		}
		c = w.NetConn()
	}
}

// handedListener is where net/http's server accepts the connections the
// fast path handed over.
type handedListener struct {
	addr  net.Addr
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (l *handedListener) put(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *handedListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handedListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handedListener) Addr() net.Addr { return l.addr }
