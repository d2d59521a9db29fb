package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// Client is the HTTP/1.1 client the net/http path talks to pods with.
// Unlike net/http's Transport, which gives each connection a reader and a
// writer goroutine and hands every request and response between them over
// channels, it does the whole exchange on the goroutine of the request:
// write the request, read the response headers, hand the body over; the
// connection goes back to the idle ones when the body has been read to
// its end. On loopback the hand-offs cost as much as the proxying.
type Client struct {
	dialer      *net.Dialer
	readTimeout time.Duration
	idleTimeout time.Duration

	mu   sync.Mutex
	idle *Idle[*Conn]
}

// Conn is a connection of a Client to a pod. It has a reader of its
// own, for the bytes of an answer read ahead, and borrows a writer
// (writers) only while it writes a request: a connection kept idle, or
// passing on an answer to a client that does not take it, holds no
// buffer for writing.
type Conn struct {
	net.Conn
	br *bufio.Reader
}

// podReadBuffer is the size of a pod connection's reader, as net/http's
// Transport's: a longer head line is read in several pieces, and a body
// read with a buffer at least as large bypasses it.
const podReadBuffer = 4 << 10

var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 8<<10) }}

// IdleTimeout is how long a connection to a pod is kept without a
// request, as nginx's upstream keepalive_timeout.
const IdleTimeout = 60 * time.Second

// NewClient returns a client whose connections take up to connect to
// open and whose answers' heads come within read; maxIdle connections
// are kept per pod.
func NewClient(connect, read time.Duration, maxIdle int) *Client {
	return &Client{
		dialer:      &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second},
		readTimeout: read,
		idleTimeout: IdleTimeout,
		idle:        NewIdle[*Conn](maxIdle),
	}
}

// Timeouts of one request (0: the client's).
type Timeouts struct{ Connect, Read, Send time.Duration }

// get returns an idle connection to addr, or a new one (always with
// fresh).
func (p *Client) get(ctx context.Context, addr string, fresh bool, connect time.Duration) (*Conn, bool, error) {
	if !fresh {
		p.mu.Lock()
		for {
			c, used, ok := p.idle.Take(addr)
			if !ok {
				break
			}
			if time.Since(used) < p.idleTimeout {
				p.mu.Unlock()
				return c, true, nil
			}
			c.Conn.Close()
		}
		p.mu.Unlock()
	}
	d := p.dialer
	if connect > 0 {
		d = &net.Dialer{Timeout: connect, KeepAlive: p.dialer.KeepAlive}
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, false, DialError{err}
	}
	return &Conn{Conn: c, br: bufio.NewReaderSize(c, podReadBuffer)}, false, nil
}

// put keeps c for the next request to addr, if there is room. A
// connection with bytes left after the answer (a body the pod sent to a
// HEAD, say) is closed: the next request would read them as its answer.
func (p *Client) put(addr string, c *Conn) {
	if c.br.Buffered() > 0 {
		c.Conn.Close()
		return
	}
	p.mu.Lock()
	kept := p.idle.Put(addr, c, time.Now())
	p.mu.Unlock()
	if !kept {
		c.Conn.Close()
	}
}

// CloseIdle closes every idle connection.
func (p *Client) CloseIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle.Expire(time.Time{}, func(c *Conn) { c.Conn.Close() })
}

// Do makes one attempt of r at addr, on a kept-alive connection unless
// fresh; reused says whether it was one, for After.
func (p *Client) Do(r *http.Request, addr string, fresh bool, t Timeouts) (resp *http.Response, reused bool, err error) {
	c, reused, err := p.get(r.Context(), addr, fresh, t.Connect)
	if err != nil {
		return nil, false, err
	}
	resp, err = p.exchange(c, r, addr, t)
	if err != nil {
		c.Conn.Close()
	}
	return resp, reused, err
}

func (p *Client) exchange(c *Conn, r *http.Request, addr string, t Timeouts) (*http.Response, error) {
	// The client going away, or the read timeout, unblocks the exchange.
	stop := context.AfterFunc(r.Context(), func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if t.Send > 0 {
		_ = c.SetWriteDeadline(time.Now().Add(t.Send))
	}
	if err := writeRequest(c.Conn, r); err != nil {
		return nil, err
	}
	if t.Send > 0 {
		_ = c.SetWriteDeadline(time.Time{})
	}
	read := p.readTimeout
	if t.Read > 0 {
		read = t.Read
	}
	_ = c.SetReadDeadline(time.Now().Add(read))
	for {
		if _, err := c.br.Peek(1); err != nil {
			if r.Context().Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
				return nil, ErrStale
			}
			return nil, err
		}
		resp, err := http.ReadResponse(c.br, r)
		if err != nil {
			return nil, badAnswer{err}
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			_ = c.SetReadDeadline(time.Time{})
			resp.Body = &Upgraded{c: c}
			return resp, nil
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			continue // 100 Continue and other informational answers
		}
		_ = c.SetReadDeadline(time.Time{})
		// A connection whose client left as it was answered has a
		// deadline in the past: stop() says whether that can still come.
		if resp.Body == http.NoBody || resp.ContentLength == 0 {
			resp.Body = http.NoBody
			if !resp.Close && !r.Close && stop() {
				p.put(addr, c)
			} else {
				c.Conn.Close()
			}
			return resp, nil
		}
		resp.Body = &body{body: resp.Body, c: c, p: p, addr: addr, reuse: !resp.Close && !r.Close && stop()}
		return resp, nil
	}
}

// writeRequest writes r to c through a writer of the pool.
func writeRequest(c net.Conn, r *http.Request) error {
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(c)
	defer func() {
		bw.Reset(nil)
		writers.Put(bw)
	}()
	if err := r.Write(bw); err != nil {
		return err
	}
	return bw.Flush()
}

// body returns the connection to the idle ones once the body was read to
// its end, and closes it when the body is abandoned half-way.
type body struct {
	body  io.ReadCloser
	c     *Conn
	p     *Client
	addr  string
	reuse bool
	done  bool
}

func (b *body) Read(buf []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.body.Read(buf)
	if err == io.EOF {
		b.finish(true)
	}
	return n, err
}

func (b *body) Close() error {
	b.finish(false)
	return nil
}

func (b *body) finish(complete bool) {
	if b.done {
		return
	}
	b.done = true
	if complete && b.reuse {
		b.p.put(b.addr, b.c)
		return
	}
	b.c.Conn.Close()
}

// Upgraded is the connection after 101 Switching Protocols, readable and
// writable, as the reverse proxy's tunnel needs it. Closing it ends the
// tunnel: the reverse proxy then closes the client's side too.
type Upgraded struct {
	c       *Conn
	mu      sync.Mutex
	closed  bool
	onClose func()
}

func (u *Upgraded) Read(b []byte) (int, error)  { return u.c.br.Read(b) }
func (u *Upgraded) Write(b []byte) (int, error) { return u.c.Conn.Write(b) }

// OnClose has f called when the connection closes (at once if it did).
func (u *Upgraded) OnClose(f func()) {
	u.mu.Lock()
	closed := u.closed
	u.onClose = f
	u.mu.Unlock()
	if closed {
		f()
	}
}

func (u *Upgraded) Close() error {
	u.mu.Lock()
	f := u.onClose
	first := !u.closed
	u.closed, u.onClose = true, nil
	u.mu.Unlock()
	if first && f != nil {
		f()
	}
	return u.c.Conn.Close()
}
