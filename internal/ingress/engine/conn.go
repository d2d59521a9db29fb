package engine

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ingress/h1"
	"github.com/svcnet/svcnet/internal/ingress/upstream"
)

// clientBuffer is the size of a client connection's read buffer: a
// request head that does not fit goes to net/http, whose limit (431
// beyond) applies. podBuffer is a pod connection's: an answer head that
// does not fit is read by net/http's response reader.
const (
	clientBuffer = 4 << 10
	podBuffer    = 16 << 10
)

// The states of a client connection.
const (
	stHead   = iota // reading a request head
	stSend          // connecting to a pod, writing the head to it
	stAnswer        // waiting for the answer's head
	stBody          // passing the answer's body on
	stFlush         // writing the rest of the answer
	stGone          // closed, or moved off the loop
)

// How an answer's body is framed, as it comes from the pod.
const (
	byLength   = iota // its Content-Length, or no body
	chunked           // in chunks: passed on in chunks of the engine's
	untilClose        // until the pod closes: passed on in chunks
)

// conn is a client connection on a loop.
type conn struct {
	l        *loop
	fd       int
	gen      int32
	release  func()
	ip       string // the client's address without its port
	x        Exchange
	active   bool // x is a request not recorded yet
	state    int
	readable bool // the socket may have bytes: not read to EAGAIN since its last event
	rdhup    bool // the client shut its side: read until EOF
	lastErr  error
	in       []byte
	headLen  int
	out      []byte // for the client, not written yet
	// due is when the connection's wait times out (sweep); zero: none.
	// In stHead the client's (its head, or its next request), in stSend
	// and stAnswer the pod's; in stBody and stFlush, where out holds the
	// only bytes for the client, the client's taking any of them
	// (Options.Write), zero while out is empty.
	due time.Time

	head   []byte       // the head the pod gets
	fwd    h1.Forwarded // the connection's; RequestID the request's
	id     [32]byte
	resp   h1.Response
	frame  int
	chunks h1.Chunks

	tried     int  // endpoints tried
	pod       *pod // the pod connection of the request
	sent      int  // of the head, to pod
	left      int64
	keep      bool
	podClose  bool // the pod closes its connection after this answer
	queued    bool // in the loop's sends
	answering bool // in the loop's answers
}

// pod is a connection from a loop to a pod.
type pod struct {
	l          *loop
	fd         int
	gen        int32
	addr       string
	c          *conn  // the request it serves; nil while idle
	buf        []byte // read from the pod, from off
	off        int
	readable   bool
	rdhup      bool // the pod shut its side: read until EOF
	connecting bool
	reused     bool
}

func (c *conn) event(ev uint32) {
	if ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		c.readable = true
	}
	if ev&(unix.EPOLLRDHUP|unix.EPOLLHUP) != 0 {
		c.rdhup = true
	}
	if ev&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) != 0 && len(c.out) > 0 {
		c.flush()
		if c.state == stGone {
			return
		}
	}
	c.step()
}

// step moves the connection on as far as its sockets allow.
func (c *conn) step() {
	switch c.state {
	case stHead:
		c.readHead()
	case stFlush:
		if len(c.out) == 0 {
			c.next()
		}
	case stBody:
		if len(c.out) == 0 && c.pod != nil && c.pod.readable {
			c.pod.step()
		}
	default:
		// A client that closes while its request is served: noticed when
		// writing the answer, as net/http's server does.
	}
}

// readHead reads until a whole request head is in, and serves it.
func (c *conn) readHead() {
	for {
		if len(c.in) > 0 {
			n, ok := h1.ParseRequest(c.in, &c.x.Head)
			if !ok {
				c.toNetHTTP()
				return
			}
			if n > 0 {
				c.headLen = n
				c.begin()
				return
			}
			if len(c.in) == cap(c.in) {
				c.toNetHTTP()
				return
			}
		}
		if !c.readable {
			return
		}
		if c.l.e.closing.Load() && len(c.in) == 0 {
			c.close()
			return
		}
		room := c.in[len(c.in):cap(c.in)]
		n, err := unix.Read(c.fd, room)
		switch {
		case err == unix.EAGAIN:
			c.readable = false
			return
		case err == unix.EINTR:
			continue
		case err != nil || n == 0:
			c.close()
			return
		}
		if n < len(room) && !c.rdhup {
			c.readable = false
		}
		if len(c.in) == 0 && c.due.Sub(c.l.now) > c.l.e.o.Header {
			// Idle until now: the head is due within the header timeout.
			c.due = c.l.now.Add(c.l.e.o.Header)
		}
		c.in = c.in[:len(c.in)+n]
	}
}

// begin starts serving the request whose head was read.
func (c *conn) begin() {
	x := &c.x
	h := &x.Head
	// A client asks the same host and path again and again: a string
	// made per request is an allocation, and garbage to collect.
	if string(h.Path) != x.Path {
		x.Path = string(h.Path)
	}
	if string(h.Host) != x.Host {
		x.Host = string(h.Host)
	}
	x.Began = time.Now()
	x.Route, x.Up, x.Endpoints, x.Start, x.Timeouts = nil, nil, nil, 0, upstream.Timeouts{}
	x.Upstream, x.Status, x.Bytes = "", 0, 0
	if !c.l.e.h.Route(x) || len(x.Endpoints) == 0 {
		c.toNetHTTP()
		return
	}
	x.ID = h.RequestID
	if x.ID == nil {
		var raw [16]byte
		_, _ = c.l.ids.Read(raw[:])
		hex.Encode(c.id[:], raw[:])
		x.ID = c.id[:]
	}
	c.fwd.RequestID = x.ID
	c.head = h1.AppendRequest(c.head[:0], h, &c.fwd)
	c.active, c.tried, c.due, c.lastErr = true, 0, time.Time{}, nil
	c.state = stSend
	c.tryEndpoint()
}

// tryEndpoint sends the request to the next endpoint not tried yet, or
// answers the client with the last failure when none is left.
func (c *conn) tryEndpoint() {
	x := &c.x
	n := len(x.Endpoints)
	if c.tried >= n {
		err := c.lastErr
		if err == nil {
			err = upstream.DialError{Err: errors.New("every endpoint failed")}
		}
		c.failWith(err)
		return
	}
	x.Upstream = x.Endpoints[(x.Start+c.tried)%n]
	c.tried++
	c.connect(false)
}

// connect sends the head on an idle connection to the endpoint, or a
// new one (always with fresh).
func (c *conn) connect(fresh bool) {
	l, addr := c.l, c.x.Upstream
	var pc *pod
	var ok bool
	if !fresh {
		pc, _, ok = l.idle.Take(addr)
	}
	if ok {
		pc.reused = true
	} else {
		var err error
		if pc, err = l.dial(addr); err != nil {
			c.dialFailed(err)
			return
		}
	}
	pc.c, c.pod, c.sent = c, pc, 0
	c.state = stSend
	if pc.connecting {
		c.due = l.now.Add(c.connectTimeout())
		return
	}
	c.send()
}

// dialFailed goes on with the next endpoint after a failure to connect.
func (c *conn) dialFailed(err error) {
	c.lastErr = upstream.DialError{Err: err}
	c.l.e.h.DialFailed()
	c.tryEndpoint()
}

func (c *conn) connectTimeout() time.Duration {
	if t := c.x.Timeouts.Connect; t > 0 {
		return t
	}
	return c.l.e.o.Connect
}

func (c *conn) readTimeout() time.Duration {
	if t := c.x.Timeouts.Read; t > 0 {
		return t
	}
	return c.l.e.o.Read
}

// dial starts a connection to addr ("ip:port").
func (l *loop) dial(addr string) (*pod, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}
	family := unix.AF_INET
	var sa unix.Sockaddr
	if ap.Addr().Is4() {
		sa = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	} else {
		family = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	// As Go's dialer: no Nagle delay, keep-alive probes.
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1)
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, 30)
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, 30)
	pc := &pod{l: l, fd: fd, addr: addr, buf: make([]byte, 0, podBuffer)}
	switch err := unix.Connect(fd, sa); err {
	case nil:
	case unix.EINPROGRESS:
		pc.connecting = true
	default:
		unix.Close(fd)
		return nil, err
	}
	if !l.register(fd, pc) {
		unix.Close(fd)
		return nil, errors.New("epoll_ctl failed")
	}
	return pc, nil
}

// send writes the head to the pod, and waits for its answer.
func (c *conn) send() {
	if !c.l.sending {
		if !c.queued {
			c.queued = true
			c.l.sends = append(c.l.sends, c)
		}
		return
	}
	pc := c.pod
	for c.sent < len(c.head) {
		n, err := unix.Write(pc.fd, c.head[c.sent:])
		if err == unix.EAGAIN {
			wait := c.x.Timeouts.Send
			if wait <= 0 {
				wait = c.readTimeout()
			}
			c.due = c.l.now.Add(wait)
			return // on EPOLLOUT
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			c.podFailed(err)
			return
		}
		c.sent += n
	}
	c.state = stAnswer
	c.due = c.l.now.Add(c.readTimeout())
	if pc.readable {
		pc.step()
	}
}

// podFailed follows the next-upstream rules after a pod connection failed
// before any byte of its answer.
func (c *conn) podFailed(err error) {
	pc := c.pod
	reused := pc.reused
	pc.close()
	c.pod = nil
	switch upstream.After(err, upstream.Attempt{Method: string(c.x.Head.Method), Reused: reused}) {
	case upstream.Again:
		c.connect(true)
	case upstream.Another:
		c.lastErr = err
		c.tryEndpoint()
	default:
		c.failWith(err)
	}
}

// failWith answers the client 502 or 504 for err.
func (c *conn) failWith(err error) {
	c.due = time.Time{} // the pod's; from here only the client's write is waited for
	status, text := upstream.GatewayError(err)
	c.out = h1.AppendError(c.out, status, text, string(c.x.Head.Method) == "HEAD", c.x.Head.Close)
	c.x.Status = status
	c.keep = true
	c.done()
}

func (pc *pod) event(ev uint32) {
	if ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		pc.readable = true
	}
	if ev&(unix.EPOLLRDHUP|unix.EPOLLHUP) != 0 {
		pc.rdhup = true // its edge came; a short read must not wait for another
	}
	c := pc.c
	if c == nil {
		if pc.readable {
			// Idle: the pod closed it (or sent what it should not).
			pc.l.dropIdle(pc)
		}
		return
	}
	if pc.connecting {
		if ev&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return
		}
		pc.connecting = false
		if errno, err := unix.GetsockoptInt(pc.fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || errno != 0 {
			if err == nil {
				err = syscall.Errno(errno)
			}
			pc.close()
			c.pod = nil
			c.dialFailed(err)
			return
		}
		c.send()
		return
	}
	if c.state == stSend && ev&unix.EPOLLOUT != 0 {
		c.send()
		return
	}
	if pc.readable {
		pc.step()
	}
}

// step reads what the pod sent and passes it on.
func (pc *pod) step() {
	c := pc.c
	for c != nil && pc.c == c && (c.state == stAnswer || c.state == stBody) && pc.readable && len(c.out) == 0 {
		if len(pc.buf) == cap(pc.buf) {
			if pc.off == 0 {
				if c.state == stAnswer {
					c.toGoroutine() // a head larger than the buffer
				} else {
					c.abandon() // a chunk's line larger than the buffer
				}
				return
			}
			pc.buf, pc.off = pc.buf[:copy(pc.buf, pc.buf[pc.off:])], 0
		}
		room := pc.buf[len(pc.buf):cap(pc.buf)]
		n, err := unix.Read(pc.fd, room)
		if err == unix.EAGAIN {
			pc.readable = false
			return
		}
		if err == unix.EINTR {
			continue
		}
		if n == 0 && err == nil {
			err = io.EOF
		}
		if err != nil {
			switch {
			case c.state == stAnswer && len(pc.buf) == pc.off:
				c.podFailed(err)
			case c.state == stAnswer:
				// A head cut short: 502.
				pc.close()
				c.pod = nil
				c.failWith(err)
			case c.frame == untilClose && err == io.EOF:
				c.out = append(c.out, h1.LastChunk...)
				c.podClose = true
				c.bodyDone()
			default:
				c.abandon() // half an answer: only closing tells the client
			}
			return
		}
		if n < len(room) && !pc.rdhup {
			pc.readable = false
		}
		pc.buf = pc.buf[:len(pc.buf)+n]
		if c.state == stAnswer {
			c.answerHead()
		} else {
			c.passBody()
		}
	}
}

// answerHead parses the answer's head, once it is in.
func (c *conn) answerHead() {
	pc := c.pod
	for {
		n, ok := h1.ParseResponse(pc.buf[pc.off:], &c.resp)
		if !ok {
			c.toGoroutine()
			return
		}
		if n == 0 {
			return // more to come
		}
		pc.off += n
		if c.resp.Status >= 200 {
			break
		}
		// 100 Continue and other informational answers are not passed on.
	}
	resp := &c.resp
	noBody := h1.NoBody(c.x.Head.Method, resp.Status)
	c.frame, c.left, c.podClose = byLength, 0, resp.Close
	switch {
	case noBody:
	case resp.ContentLength >= 0:
		c.left = resp.ContentLength
	case resp.Chunked:
		c.frame, c.chunks = chunked, h1.Chunks{}
	default:
		c.frame = untilClose
	}
	c.x.Status = resp.Status
	c.out = h1.AppendResponse(c.out, resp, noBody, c.x.Head.Close)
	c.state = stBody
	c.due = time.Time{} // the body takes its time
	c.passBody()
}

// passBody moves what the pod sent of the body to the client.
func (c *conn) passBody() {
	pc := c.pod
	switch c.frame {
	case byLength:
		take := min(int64(len(pc.buf)-pc.off), c.left)
		c.out = append(c.out, pc.buf[pc.off:pc.off+int(take)]...)
		pc.off += int(take)
		c.left -= take
		c.x.Bytes += take
		if c.left == 0 {
			c.bodyDone()
			return
		}
	case chunked:
		for {
			used, data, end, err := c.chunks.Next(pc.buf[pc.off:])
			pc.off += used
			c.out = h1.AppendChunk(c.out, data)
			c.x.Bytes += int64(len(data))
			if err != nil {
				c.flush() // what came before the fault, then the cut
				if c.state != stGone {
					c.abandon()
				}
				return
			}
			if end {
				c.out = append(c.out, h1.LastChunk...)
				c.bodyDone()
				return
			}
			if used == 0 {
				break
			}
		}
	case untilClose:
		data := pc.buf[pc.off:]
		c.out = h1.AppendChunk(c.out, data)
		c.x.Bytes += int64(len(data))
		pc.off = len(pc.buf)
	}
	if pc.off == len(pc.buf) {
		pc.buf, pc.off = pc.buf[:0], 0
	}
	c.flush()
}

// bodyDone ends an answer read to its end: the pod connection can serve
// another request, unless the pod sent more than the answer or said it
// closes.
func (c *conn) bodyDone() {
	pc := c.pod
	if c.podClose || pc.rdhup || pc.off != len(pc.buf) {
		pc.close()
	} else {
		pc.buf, pc.off = pc.buf[:0], 0
		c.l.putIdle(pc)
	}
	c.pod = nil
	c.keep = true
	c.done()
}

// done ends the request: its answer is in c.out.
func (c *conn) done() {
	c.active = false
	c.l.e.h.Done(&c.x)
	c.keep = c.keep && !c.x.Head.Close && !c.l.e.closing.Load()
	c.state = stFlush
	if !c.answering {
		c.answering = true
		c.l.answers = append(c.l.answers, c)
	}
}

// next goes on with the next request, or closes the connection.
func (c *conn) next() {
	if !c.keep {
		c.close()
		return
	}
	c.in = c.in[:copy(c.in, c.in[c.headLen:])]
	c.headLen = 0
	c.state = stHead
	c.due = c.l.now.Add(c.l.e.o.Idle)
	if len(c.in) > 0 {
		c.due = c.l.now.Add(c.l.e.o.Header)
	}
	c.l.ready = append(c.l.ready, c)
}

// flush writes c.out to the client, as far as it takes it. What it
// leaves is due within the write timeout of the last write that made
// progress, so a client that reads slowly but steadily keeps its
// connection and one that stops reading loses it.
func (c *conn) flush() {
	progress := false
	for len(c.out) > 0 {
		n, err := unix.Write(c.fd, c.out)
		if err == unix.EAGAIN {
			if w := c.l.e.o.Write; w > 0 && (progress || c.due.IsZero()) {
				c.due = c.l.now.Add(w)
			}
			return
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			c.abandon()
			return
		}
		progress = true
		c.out = c.out[:copy(c.out, c.out[n:])]
	}
	c.due = time.Time{}
}

// abandon closes the client and the pod connection of its request.
func (c *conn) abandon() {
	if c.pod != nil {
		c.pod.close()
		c.pod = nil
	}
	if c.active && c.x.Status != 0 {
		c.active = false
		c.l.e.h.Done(&c.x)
	}
	c.close()
}

// timeout ends what waited too long.
func (c *conn) timeout() {
	switch c.state {
	case stHead:
		c.close() // the head did not come in time, or idle too long
	case stSend:
		if c.pod != nil && c.pod.connecting {
			c.pod.close()
			c.pod = nil
			c.dialFailed(os.ErrDeadlineExceeded)
			return
		}
		c.podFailed(os.ErrDeadlineExceeded)
	case stAnswer:
		c.pod.close()
		c.pod = nil
		c.failWith(os.ErrDeadlineExceeded)
	case stBody, stFlush:
		// The client took none of its answer for the write timeout:
		// what is held for it, and its pod connection, go with it.
		c.l.e.h.WriteTimedOut()
		c.abandon()
	}
}

func (c *conn) close() {
	if c.state == stGone {
		return
	}
	c.state = stGone
	c.l.unregister(c.fd)
	unix.Close(c.fd)
	c.l.clients--
	c.release()
}

func (pc *pod) close() {
	if pc.fd < 0 {
		return
	}
	pc.l.unregister(pc.fd)
	unix.Close(pc.fd)
	pc.fd = -1
	pc.c = nil
}

// toNetHTTP gives the connection, with what was read, to net/http.
func (c *conn) toNetHTTP() {
	nc, err := c.detach()
	if err != nil {
		c.release()
		return
	}
	c.l.e.o.ToNetHTTP(&bufferedConn{Conn: &releasingConn{Conn: nc, release: c.release},
		br: bufio.NewReaderSize(io.MultiReader(bytes.NewReader(c.in), nc), clientBuffer)})
}

// detach takes the client connection off the loop, as a net.Conn of
// Go's poller (a duplicate descriptor).
func (c *conn) detach() (net.Conn, error) {
	c.state = stGone
	c.l.unregister(c.fd)
	c.l.clients--
	return fileConn(c.fd)
}

// fileConn makes a descriptor of a loop a net.Conn of Go's poller,
// closing the loop's.
func fileConn(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "")
	nc, err := net.FileConn(f) // a duplicate
	f.Close()
	return nc, err
}

// bufferedConn reads what its buffer holds before the connection.
type bufferedConn struct {
	net.Conn
	br *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.br.Read(p) }

// NetConn is the connection underneath.
func (c *bufferedConn) NetConn() net.Conn { return c.Conn }

// releasingConn gives back a connection's slot when it closes.
type releasingConn struct {
	net.Conn
	release func()
	once    sync.Once
}

func (c *releasingConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// NetConn is the connection underneath.
func (c *releasingConn) NetConn() net.Conn { return c.Conn }
