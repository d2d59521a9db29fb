package server

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// An exec or attach session ends with the node's close of its connection
// (remotecommand: the status, a reset of every stream, then the close).
// Closed while the peer's last frames are still unread, the connection
// ends with a TCP reset instead of a FIN; the API server's proxy, whose
// write to the node then fails, tears down its side and the kubectl
// connection with it, before it has passed on what it has read from
// the node: the status and the last output. kubectl then ends as if the
// session had ended well, without them. So these connections end as
// net/http's server ends one it answered: the node says it is done
// (TLS close_notify, EOF to the peer) and closes once the peer has
// closed too, or after lingerTimeout.

// lingerTimeout bounds how long a closed session waits for its peer.
var lingerTimeout = 5 * time.Second

// lingering is a response writer whose hijacked connection closes
// gracefully (lingerConn).
type lingering struct{ http.ResponseWriter }

func (w lingering) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the response cannot be hijacked")
	}
	conn, rw, err := h.Hijack()
	if err != nil {
		return nil, nil, err
	}
	lc := newLingerConn(conn, rw.Reader)
	return lc, bufio.NewReadWriter(bufio.NewReader(lc), rw.Writer), nil
}

// lingerConn is a connection whose Close ends its sending side first
// and waits for the reads, which its user goes on with, to end (the
// peer closed) before it closes, for at most lingerTimeout.
type lingerConn struct {
	net.Conn
	r       *bufio.Reader // what the server read ahead, then the connection
	once    sync.Once
	readEnd chan struct{} // closed once a read fails
}

func newLingerConn(conn net.Conn, r *bufio.Reader) *lingerConn {
	return &lingerConn{Conn: conn, r: r, readEnd: make(chan struct{})}
}

func (c *lingerConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil {
		c.once.Do(func() { close(c.readEnd) })
	}
	return n, err
}

func (c *lingerConn) Close() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		t := time.NewTimer(lingerTimeout)
		select {
		case <-c.readEnd:
		case <-t.C:
		}
		t.Stop()
	}
	return c.Conn.Close()
}
