package engine

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// WithWriteTimeout is c, a client connection served by goroutines (the
// engine's answers that h1 declines, net/http's server), bounded as the
// loops bound theirs: a write that waits longer than d for the client to
// take any of its bytes closes the connection and calls timedOut, once.
// As nginx's send_timeout, d bounds the time between two writes that make
// progress, not the whole answer, so a client that reads slowly but
// steadily keeps its connection; it holds to within a quarter of d. A
// deadline set on the connection by its user bounds its writes too. d <= 0
// is c.
func WithWriteTimeout(c net.Conn, d time.Duration, timedOut func()) net.Conn {
	if d <= 0 {
		return c
	}
	wc := &writeTimeoutConn{Conn: c, d: d, onTimeout: timedOut, raw: rawConn(c)}
	wc.measure = wc.measureRoom
	return wc
}

type writeTimeoutConn struct {
	net.Conn
	d         time.Duration
	onTimeout func()
	// own is the write deadline the connection's user set, in Unix
	// nanoseconds; 0: none.
	own      atomic.Int64
	timedOut atomic.Bool
	// raw is the socket underneath, for Room; nil if none. Room
	// measures it with measure (measureRoom), into room and roomErr:
	// only the connection's writer calls Room.
	raw     syscall.RawConn
	measure func(fd uintptr)
	room    int
	roomErr error
}

// Write writes p whole. A blocked write wakes every quarter of d to see
// whether the client took anything meanwhile: Go's poller reports a
// write's progress only when it returns.
func (c *writeTimeoutConn) Write(p []byte) (int, error) {
	written := 0
	last := time.Now() // when the client last took bytes, or the write began
	for {
		dl := min(last.Add(c.d).UnixNano(), time.Now().Add(c.d/4).UnixNano())
		own := c.own.Load()
		if own != 0 {
			dl = min(dl, own)
		}
		_ = c.Conn.SetWriteDeadline(time.Unix(0, dl))
		n, err := c.Conn.Write(p[written:])
		written += n
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			return written, err
		}
		now := time.Now()
		switch {
		case own != 0 && now.UnixNano() >= own:
			return written, err // the user's own deadline
		case n > 0:
			last = now
		case now.Sub(last) >= c.d:
			c.timeOut()
			return written, err
		}
	}
}

// timeOut closes the connection for the send timeout, counted once.
func (c *writeTimeoutConn) timeOut() {
	c.Conn.Close()
	if c.timedOut.CompareAndSwap(false, true) {
		c.onTimeout()
	}
}

// SetWriteDeadline and SetDeadline keep the user's write deadline, for
// the writes to come, and set it at once for a write under way.
func (c *writeTimeoutConn) SetWriteDeadline(t time.Time) error {
	c.own.Store(unixNano(t))
	return c.Conn.SetWriteDeadline(t)
}

func (c *writeTimeoutConn) SetDeadline(t time.Time) error {
	c.own.Store(unixNano(t))
	return c.Conn.SetDeadline(t)
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// NetConn is the connection underneath.
func (c *writeTimeoutConn) NetConn() net.Conn { return c.Conn }
