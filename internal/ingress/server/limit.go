package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
)

// Limit counts open client connections over every listener given it.
type Limit struct {
	max  int64
	open atomic.Int64
}

// NewLimit is a limit of max connections.
func NewLimit(max int) *Limit { return &Limit{max: int64(max)} }

// Listener counts the connections it accepts against Limit, if any. One
// beyond the limit is still served, but only with a 503 that closes it: a
// client learns why, where a refused or stalled connection would tell it
// nothing.
type Listener struct {
	net.Listener
	Limit *Limit
}

// Port is the port the listener is bound to.
func (l *Listener) Port() int { return l.Addr().(*net.TCPAddr).Port }

// String is the listener's address, "" for none.
func (l *Listener) String() string {
	if l == nil {
		return ""
	}
	return l.Addr().String()
}

type countedConn struct {
	net.Conn
	limit *Limit
	over  bool
	once  atomic.Bool
}

func (c *countedConn) Close() error {
	c.releaseSlot()
	return c.Conn.Close()
}

// SyscallConn is the socket's, for what measures it (the proxy sizes
// its writes by the room in a client's socket).
func (c *countedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// releaseSlot gives the connection's slot back, once.
func (c *countedConn) releaseSlot() {
	if c.once.CompareAndSwap(false, true) {
		c.limit.open.Add(-1)
	}
}

func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil || l.Limit == nil {
		return c, err
	}
	n := l.Limit.open.Add(1)
	return &countedConn{Conn: c, limit: l.Limit, over: n > l.Limit.max}, nil
}

type overKey struct{}

// connContext marks the requests of a connection over the limit.
func (l *Listener) connContext(ctx context.Context, c net.Conn) context.Context {
	if over(c) {
		return context.WithValue(ctx, overKey{}, true)
	}
	return ctx
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

// limited answers the requests of connections over the limit with 503.
func limited(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(overKey{}) != nil {
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			http.Error(w, "503 too many connections", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}
