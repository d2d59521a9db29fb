package proxy

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

// pods is the HTTP/1.1 client the proxy talks to pods with. Unlike
// net/http's Transport, which gives each connection a reader and a writer
// goroutine and hands every request and response between them over
// channels, it does the whole exchange on the goroutine of the request:
// write the request, read the response headers, hand the body over; the
// connection goes back to the pool when the body has been read to its
// end. On loopback the hand-offs cost as much as the proxying.
type pods struct {
	dialer      *net.Dialer
	readTimeout time.Duration
	maxIdle     int
	idleTimeout time.Duration

	mu   sync.Mutex
	idle map[string][]*podConn // by "ip:port", most recent last
}

type podConn struct {
	net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	used time.Time // when it went idle
	// readBy is the read deadline the fast path set last (zero: none).
	readBy time.Time
}

func newPods(connect, read time.Duration, maxIdle int) *pods {
	return &pods{
		dialer:      &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second},
		readTimeout: read,
		maxIdle:     maxIdle,
		idleTimeout: 60 * time.Second,
		idle:        map[string][]*podConn{},
	}
}

// timeouts of one request (0: the pods' defaults).
type timeouts struct{ connect, read, send time.Duration }

// get returns an idle connection to addr, or a new one.
func (p *pods) get(ctx context.Context, addr string, connect time.Duration) (*podConn, bool, error) {
	p.mu.Lock()
	for l := p.idle[addr]; len(l) > 0; l = p.idle[addr] {
		c := l[len(l)-1]
		p.idle[addr] = l[:len(l)-1]
		if time.Since(c.used) < p.idleTimeout {
			p.mu.Unlock()
			return c, true, nil
		}
		c.Conn.Close()
	}
	p.mu.Unlock()
	d := p.dialer
	if connect > 0 {
		d = &net.Dialer{Timeout: connect, KeepAlive: p.dialer.KeepAlive}
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	return &podConn{Conn: c, br: bufio.NewReaderSize(c, 16<<10), bw: bufio.NewWriterSize(c, 8<<10)}, false, nil
}

// put keeps c for the next request to addr, if there is room. A
// connection with bytes left after the answer (a body the pod sent to a
// HEAD, say) is closed: the next request would read them as its answer.
func (p *pods) put(addr string, c *podConn) {
	if c.br.Buffered() > 0 {
		c.Conn.Close()
		return
	}
	c.used = time.Now()
	p.mu.Lock()
	if l := p.idle[addr]; len(l) < p.maxIdle {
		p.idle[addr] = append(l, c)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	c.Conn.Close()
}

// CloseIdle closes every idle connection.
func (p *pods) CloseIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, l := range p.idle {
		for _, c := range l {
			c.Conn.Close()
		}
		delete(p.idle, addr)
	}
}

// errStale is a reused connection that the pod had closed: nothing was
// answered, so a request that can be sent again is.
var errStale = errors.New("the pod closed the kept-alive connection")

// dialError marks a failure to connect, which the caller retries on the
// next endpoint.
type dialError struct{ err error }

func (e dialError) Error() string { return e.err.Error() }
func (e dialError) Unwrap() error { return e.err }

// do sends r to r.URL.Host over HTTP/1.1.
func (p *pods) do(r *http.Request, t timeouts) (*http.Response, error) {
	addr := r.URL.Host
	for {
		c, reused, err := p.get(r.Context(), addr, t.connect)
		if err != nil {
			return nil, dialError{err}
		}
		resp, err := p.exchange(c, r, t)
		if err == nil {
			return resp, nil
		}
		c.Conn.Close()
		if errors.Is(err, errStale) && reused && replayable(r) && idempotent(r.Method) {
			continue
		}
		return nil, err
	}
}

// replayable reports whether r can be sent again after a stale
// connection swallowed it: it has no body.
func replayable(r *http.Request) bool {
	return r.Body == nil || r.Body == http.NoBody
}

func (p *pods) exchange(c *podConn, r *http.Request, t timeouts) (*http.Response, error) {
	// The client going away, or the read timeout, unblocks the exchange.
	stop := context.AfterFunc(r.Context(), func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c.readBy = time.Time{} // the fast path's record of the deadline ends here
	if t.send > 0 {
		_ = c.SetWriteDeadline(time.Now().Add(t.send))
	}
	if err := r.Write(c.bw); err != nil {
		return nil, err
	}
	if err := c.bw.Flush(); err != nil {
		return nil, err
	}
	if t.send > 0 {
		_ = c.SetWriteDeadline(time.Time{})
	}
	read := p.readTimeout
	if t.read > 0 {
		read = t.read
	}
	_ = c.SetReadDeadline(time.Now().Add(read))
	for {
		if _, err := c.br.Peek(1); err != nil {
			if r.Context().Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
				return nil, errStale
			}
			return nil, err
		}
		resp, err := http.ReadResponse(c.br, r)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			_ = c.SetReadDeadline(time.Time{})
			resp.Body = &upgraded{podConn: c}
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
				p.put(r.URL.Host, c)
			} else {
				c.Conn.Close()
			}
			return resp, nil
		}
		resp.Body = &podBody{body: resp.Body, c: c, p: p, addr: r.URL.Host, reuse: !resp.Close && !r.Close && stop()}
		return resp, nil
	}
}

// podBody returns the connection to the pool once the body was read to
// its end, and closes it when the body is abandoned half-way.
type podBody struct {
	body  io.ReadCloser
	c     *podConn
	p     *pods
	addr  string
	reuse bool
	done  bool
}

func (b *podBody) Read(buf []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.body.Read(buf)
	if err == io.EOF {
		b.finish(true)
	}
	return n, err
}

func (b *podBody) Close() error {
	b.finish(false)
	return nil
}

func (b *podBody) finish(complete bool) {
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

// upgraded is the connection after 101 Switching Protocols, readable and
// writable, as the reverse proxy's tunnel needs it. Closing it ends the
// tunnel: the reverse proxy then closes the client's side too.
type upgraded struct {
	*podConn
	once    sync.Once
	untrack func()
}

func (u *upgraded) Read(b []byte) (int, error)  { return u.br.Read(b) }
func (u *upgraded) Write(b []byte) (int, error) { return u.Conn.Write(b) }
func (u *upgraded) Close() error {
	u.once.Do(func() {
		if u.untrack != nil {
			u.untrack()
		}
	})
	return u.Conn.Close()
}
