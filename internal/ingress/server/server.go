// Package server serves the ingress's listeners: plain HTTP/1.1 through
// the proxy's event-loop engine, with net/http's server as the single
// fallback for what the engine leaves to it; HTTPS, HTTP/2 (with TLS, or
// without it sniffed from the first bytes) and the metrics listener
// through net/http. It keeps the connection limit over every client
// listener and shuts everything down together.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcnet/svcnet/internal/ingress/engine"
	"github.com/svcnet/svcnet/internal/ingress/proxy"
)

// HeaderTimeout bounds the wait for a request's headers (and for the
// first bytes that tell HTTP/1 from HTTP/2 without TLS).
const HeaderTimeout = 10 * time.Second

// IdleTimeout closes a kept-alive client connection without a request,
// as nginx's keepalive_timeout.
const IdleTimeout = 75 * time.Second

// ShutdownGrace is how long Shutdown lets requests in flight finish.
const ShutdownGrace = 5 * time.Second

// Servers are the servers of the listeners.
type Servers struct {
	mu     sync.Mutex // Serve may add servers while others run
	list   []*http.Server
	fronts []*front
	errs   chan error
}

// New returns servers serving nothing yet.
func New() *Servers { return &Servers{errs: make(chan error, 8)} }

// Errs receives the failures of the listeners.
func (s *Servers) Errs() <-chan error { return s.errs }

// Serve serves h on l: over TLS when tlsConfig is set (with HTTP/2), else
// plain HTTP/1.1, and HTTP/2 without TLS too when h2c (on connections
// splitH2C sorts out, each side its own server). With px, l's clients are
// px's: plain HTTP/1.1 goes through px's engine first, and every
// connection net/http serves has px's send timeout. Requests of
// connections over l's limit get 503.
func (s *Servers) Serve(l *Listener, h http.Handler, tlsConfig *tls.Config, h2c bool, px *proxy.Proxy) {
	if l.Limit != nil {
		h = limited(h)
	}
	connContext := l.connContext
	if px != nil {
		connContext = func(ctx context.Context, c net.Conn) context.Context {
			return px.ConnContext(l.connContext(ctx, c), c)
		}
	}
	newServer := func(http1, http2, unencrypted bool) *http.Server {
		srv := &http.Server{
			Handler:           h,
			ReadHeaderTimeout: HeaderTimeout,
			IdleTimeout:       IdleTimeout,
			MaxHeaderBytes:    32 << 10, // more gets 431
			ErrorLog:          log.New(io.Discard, "", 0),
			ConnContext:       connContext,
			TLSConfig:         tlsConfig,
			Protocols:         new(http.Protocols),
		}
		srv.Protocols.SetHTTP1(http1)
		srv.Protocols.SetHTTP2(http2)
		srv.Protocols.SetUnencryptedHTTP2(unencrypted)
		s.mu.Lock()
		s.list = append(s.list, srv)
		s.mu.Unlock()
		return srv
	}
	run := func(srv *http.Server, l net.Listener) {
		if px != nil {
			l = &wrappingListener{Listener: l, wrap: px.ClientConn}
		}
		go func() {
			var err error
			if tlsConfig != nil {
				err = srv.ServeTLS(l, "", "")
			} else {
				err = srv.Serve(l)
			}
			// net.ErrClosed: the other side of a split shut the
			// listener both share.
			if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
				s.errs <- err
			}
		}()
	}
	h1 := net.Listener(l)
	if h2c {
		var h2 net.Listener
		h1, h2 = splitH2C(l, HeaderTimeout)
		run(newServer(false, false, true), h2)
	}
	if px == nil || tlsConfig != nil {
		run(newServer(true, tlsConfig != nil, false), h1)
		return
	}
	f := newFront(px, h1, l.Port())
	s.mu.Lock()
	s.fronts = append(s.fronts, f)
	s.mu.Unlock()
	go func() {
		if err := f.serve(); err != nil && !errors.Is(err, net.ErrClosed) {
			s.errs <- err
		}
	}()
	run(newServer(true, false, false), f.handed)
}

// Shutdown lets requests in flight finish, each server and engine within
// ShutdownGrace, and closes the rest.
func (s *Servers) Shutdown() {
	ctx, done := context.WithTimeout(context.Background(), ShutdownGrace)
	defer done()
	s.mu.Lock()
	defer s.mu.Unlock()
	var wg sync.WaitGroup
	for _, srv := range s.list {
		wg.Go(func() { _ = srv.Shutdown(ctx) })
	}
	for _, f := range s.fronts {
		wg.Go(func() { f.shutdown(ctx) })
	}
	wg.Wait()
}

// front serves a plain HTTP listener with the proxy's engine; a
// connection the engine leaves to net/http goes, with its unread bytes,
// to net/http's server through handed, and stays there.
type front struct {
	l      net.Listener
	handed *handedListener
	// eng serves the TCP connections (all but those h2c sniffed); nil
	// if the kernel would not give epoll sets: then net/http serves
	// every connection.
	eng     *engine.Engine
	closing atomic.Bool
}

func newFront(px *proxy.Proxy, l net.Listener, port int) *front {
	f := &front{l: l, handed: &handedListener{addr: l.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}}
	// The engine must not wait for net/http's Accept.
	f.eng, _ = px.NewEngine(port, HeaderTimeout, IdleTimeout, func(c net.Conn) { go f.handed.put(c) })
	return f
}

// serve accepts the listener's connections until it fails or is closed,
// waiting out temporary failures as net/http's Serve does; then handed
// closes too.
func (f *front) serve() error {
	defer f.handed.Close()
	var wait time.Duration
	for {
		c, err := f.l.Accept()
		if err != nil {
			if temporary(err) && backoff(&wait, nil) {
				continue
			}
			return err
		}
		wait = 0
		switch raw, pending, release, ok := engineConn(c); {
		case f.closing.Load():
			c.Close()
		case ok && f.eng != nil && !over(c):
			f.eng.Serve(raw, pending, release)
		default:
			go f.handed.put(c) // over the limit: net/http answers 503
		}
	}
}

// engineConn is the TCP connection under c for the engine, the bytes
// read from it ahead (h2c's sniffing) and what gives its slot in the
// connection limit back; ok false for any other kind of connection,
// which net/http serves.
func engineConn(c net.Conn) (raw net.Conn, pending []byte, release func(), ok bool) {
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

// shutdown stops accepting and shuts the engine down (net/http's server
// of handed is among Servers' own).
func (f *front) shutdown(ctx context.Context) {
	f.closing.Store(true)
	f.l.Close()
	if f.eng != nil {
		f.eng.Shutdown(ctx)
	}
}

// handedListener is where net/http's server accepts the connections the
// engine handed over.
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

// wrappingListener wraps the connections it accepts.
type wrappingListener struct {
	net.Listener
	wrap func(net.Conn) net.Conn
}

func (l *wrappingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.wrap(c), nil
}
