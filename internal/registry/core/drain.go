package core

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// An exec or attach session through the SPDY proxy (kubectl before 1.30)
// ends with the proxy's close of the client's connection, as soon as the
// node's side has ended. By then the proxy has written the node's last
// frames, but the kernel may not have sent them yet: a client slower to
// read than the node to write (its receive window full of small frames)
// leaves them queued in the proxy's socket. The client still sends now
// and then (it closes its stdin stream once it sees the node reset it; a
// ping); such bytes reaching a socket already closed make the kernel
// answer with a TCP reset and drop what it still had to send (Linux
// counts them as TCPAbortOnData). The client then reads what had
// arrived, and its SPDY streams end as at a clean end: kubectl prints
// part of the output and exits 0 (remotecommand takes an error stream
// that ends without a status for success).
//
// So the proxy closes the client's connection as net/http closes one it
// answered: it ends its sending side (TLS close_notify; the kernel then
// sends the rest, then the end), reads and drops whatever the client
// still sends until the client closes too, or drainTimeout has passed,
// and closes only then.

// drainTimeout bounds how long a closed session waits for its client.
var drainTimeout = 5 * time.Second

// draining is a response writer whose hijacked connection closes
// gracefully (drainConn).
type draining struct{ http.ResponseWriter }

// Unwrap lets http.ResponseController reach the server's writer.
func (w draining) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w draining) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the response cannot be hijacked")
	}
	conn, rw, err := h.Hijack()
	if err != nil {
		return nil, nil, err
	}
	return &drainConn{Conn: conn}, rw, nil
}

// drainConn is a connection whose Close ends its sending side first and
// reads until the peer has closed (or for drainTimeout) before closing.
// The proxy's copy from the client may be reading it at the same time:
// a TLS connection serializes reads, and what either gets is of no use
// any more (the node's side is gone).
type drainConn struct {
	net.Conn
	once sync.Once
	err  error
}

func (c *drainConn) Close() error {
	c.once.Do(func() {
		if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			_ = c.Conn.SetReadDeadline(time.Now().Add(drainTimeout))
			_, _ = io.Copy(io.Discard, c.Conn)
		}
		c.err = c.Conn.Close()
	})
	return c.err
}
