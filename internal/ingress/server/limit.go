package controller

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
)

// connLimit counts open client connections over every listener.
type connLimit struct {
	max  int64
	open atomic.Int64
}

// listener counts the connections it accepts. One beyond the limit is
// still served, but only with a 503 that closes it: a client learns why,
// where a refused or stalled connection would tell it nothing.
type listener struct {
	net.Listener
	limit *connLimit
}

// port is the port the listener is bound to.
func (l *listener) port() int { return l.Addr().(*net.TCPAddr).Port }

// String is the listener's address, "" for none.
func (l *listener) String() string {
	if l == nil {
		return ""
	}
	return l.Addr().String()
}

type countedConn struct {
	net.Conn
	limit *connLimit
	over  bool
	once  atomic.Bool
}

func (c *countedConn) Close() error {
	c.releaseSlot()
	return c.Conn.Close()
}

// releaseSlot gives the connection's slot back, once.
func (c *countedConn) releaseSlot() {
	if c.once.CompareAndSwap(false, true) {
		c.limit.open.Add(-1)
	}
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil || l.limit == nil {
		return c, err
	}
	n := l.limit.open.Add(1)
	return &countedConn{Conn: c, limit: l.limit, over: n > l.limit.max}, nil
}

type overKey struct{}

// connContext marks the requests of a connection over the limit.
func (l *listener) connContext(ctx context.Context, c net.Conn) context.Context {
	if over(c) {
		return context.WithValue(ctx, overKey{}, true)
	}
	return ctx
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
