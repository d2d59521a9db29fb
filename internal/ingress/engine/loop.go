package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ingress/h1"
)

// Loops serve plain HTTP/1.1 client connections the way nginx's workers
// do: event loops (Options.EventLoops), each waiting on an epoll set of its own for
// its client connections and its own connections to pods, and moving a
// request along when its socket is ready, with no goroutine per
// connection. The fast path on a goroutine per connection (ServeConn)
// spent a sixth of its CPU more than nginx per request, in Go's scheduler
// (a goroutine parked per read that finds nothing yet, threads woken to
// run it), deadlines and the clock; here one epoll_wait hands over the
// ready sockets of many connections at once.
//
// A loop serves what ServeConn serves, the same way (route, head, retries,
// answers, metrics, log), for requests whose answer has a length (or no
// body). Anything else leaves the loop: a request for net/http goes there
// with its bytes, as from ServeConn; an answer the loop does not frame
// (chunked, until the pod closes, a head too large or unusual) moves, with
// its client and pod connections, to a goroutine that finishes it as
// ServeConn does and goes on serving that client the same way.
type Loops struct {
	p       *Proxy
	port    string
	t       ConnTimeouts
	handoff func(net.Conn) // to net/http, with what was read in front
	loops   []*loop
	next    atomic.Uint32
	closing atomic.Bool

	// Connections moved to goroutines, client and pod, for Shutdown:
	// closing the pod's wakes a goroutine waiting for a quiet stream.
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	pods  map[net.Conn]struct{}
	wg    sync.WaitGroup
	done  sync.WaitGroup // the loops
}

// NewLoops starts the proxy's event loops (Options.EventLoops) serving
// port's connections; handoff gives net/http the connections it is to
// serve.
func (p *Proxy) NewLoops(port int, t ConnTimeouts, handoff func(net.Conn)) (*Loops, error) {
	ls := &Loops{p: p, port: strconv.Itoa(port), t: t, handoff: handoff, conns: map[net.Conn]struct{}{}, pods: map[net.Conn]struct{}{}}
	for range p.opts.EventLoops {
		l, err := newLoop(ls)
		if err != nil {
			for _, l := range ls.loops {
				l.exit()
			}
			return nil, err
		}
		ls.loops = append(ls.loops, l)
	}
	for _, l := range ls.loops {
		ls.done.Add(1)
		go func() { defer ls.done.Done(); l.run() }()
	}
	return ls, nil
}

// Serve gives c to a loop, with the bytes read from it already. release
// is called once the connection closes (its slot in a connection limit);
// c itself is closed at once — the loop keeps a duplicate of its
// descriptor, away from Go's poller.
func (ls *Loops) Serve(c net.Conn, pending []byte, release func()) {
	ip := c.RemoteAddr().String()
	sc, ok := c.(syscall.Conn)
	var rc syscall.RawConn
	var err error
	if ok {
		rc, err = sc.SyscallConn()
	}
	fd := -1
	if ok && err == nil {
		_ = rc.Control(func(s uintptr) { fd, err = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) })
	}
	c.Close()
	if fd < 0 || err != nil {
		release()
		return
	}
	l := ls.loops[ls.next.Add(1)%uint32(len(ls.loops))]
	in := append(make([]byte, 0, max(clientBuffer, len(pending))), pending...)
	l.add(&lconn{fd: fd, remote: ip, release: release, in: in})
}

// Shutdown ends the connections as net/http's Shutdown does: those
// waiting for a request at once, those in a request after its answer;
// ctx bounds the wait, then the rest are closed.
func (ls *Loops) Shutdown(ctx context.Context) {
	ls.closing.Store(true)
	for _, l := range ls.loops {
		l.wake()
	}
	ls.mu.Lock()
	for c := range ls.conns {
		_ = c.SetReadDeadline(time.Unix(1, 0))
	}
	ls.mu.Unlock()
	done := make(chan struct{})
	go func() { ls.done.Wait(); ls.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		ls.stop()
		ls.mu.Lock()
		for c := range ls.conns {
			c.Close()
		}
		for c := range ls.pods {
			c.Close()
		}
		ls.mu.Unlock()
		<-done
	}
}

// stop makes the loops close every connection and return.
func (ls *Loops) stop() {
	ls.closing.Store(true)
	for _, l := range ls.loops {
		l.abort.Store(true)
		l.wake()
	}
}

// A loop owns an epoll set, the client connections given to it and its
// connections to pods; only its goroutine touches them.
type loop struct {
	ls    *Loops
	epfd  int
	efd   int // an eventfd: new connections, shutdown
	abort atomic.Bool

	mu       sync.Mutex
	incoming []*lconn
	exited   bool // efd and epfd are closed: nothing more is added

	fds     []any    // by descriptor: *lconn or *lpod
	gen     int32    // the last registration's number
	ready   []*lconn // whose next request is to be read (runReady)
	sends   []*lconn // whose head is to be written to its pod (runSends)
	sending bool     // in runSends: send writes
	answers []*lconn // whose answer is to be written to the client (runAnswers)
	clients int
	idle    map[string][]*lpod // by "ip:port", most recent last
	maxIdle int
	events  [128]unix.EpollEvent
	now     time.Time
	swept   time.Time
}

func newLoop(ls *Loops) (*loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	l := &loop{ls: ls, epfd: epfd, efd: efd, idle: map[string][]*lpod{},
		maxIdle: max(ls.p.pods.maxIdle/ls.p.opts.EventLoops, 1)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, efd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(efd)}); err != nil {
		unix.Close(epfd)
		unix.Close(efd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	return l, nil
}

func (l *loop) add(c *lconn) {
	l.mu.Lock()
	if l.exited {
		l.mu.Unlock()
		unix.Close(c.fd)
		c.release()
		return
	}
	l.incoming = append(l.incoming, c)
	l.wakeLocked()
	l.mu.Unlock()
}

func (l *loop) wake() {
	l.mu.Lock()
	l.wakeLocked()
	l.mu.Unlock()
}

// wakeLocked wakes the loop's epoll_wait; under l.mu, so that it never
// writes to a descriptor number exit has closed (and that may be
// another file's by now).
func (l *loop) wakeLocked() {
	if !l.exited {
		one := [8]byte{1}
		_, _ = unix.Write(l.efd, one[:])
	}
}

// exit closes the loop's descriptors, and the connections given to it
// that it did not take.
func (l *loop) exit() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.exited = true
	unix.Close(l.epfd)
	unix.Close(l.efd)
	for _, c := range l.incoming {
		unix.Close(c.fd)
		c.release()
	}
	l.incoming = nil
}

// sweepEvery is how often a loop looks for timeouts: they are checked to
// within that.
const sweepEvery = 100 * time.Millisecond

func (l *loop) run() {
	defer func() {
		for _, o := range l.fds {
			switch o := o.(type) {
			case *lconn:
				o.close()
			case *lpod:
				o.close()
			}
		}
		l.exit()
	}()
	var drained [8]byte
	for {
		// After the events, sweeps and accepts before; a send may end a
		// request whose answer was in, which makes the next one ready.
		for len(l.ready) > 0 || len(l.sends) > 0 || len(l.answers) > 0 {
			l.runReady()
			l.runSends()
			l.runAnswers()
		}
		wait := -1
		if l.clients > 0 || len(l.idle) > 0 {
			wait = int(sweepEvery / time.Millisecond)
		}
		n, err := unix.EpollWait(l.epfd, l.events[:], wait)
		if err != nil && err != unix.EINTR {
			return
		}
		l.now = time.Now()
		for _, ev := range l.events[:max(n, 0)] {
			fd := int(ev.Fd)
			if fd == l.efd {
				_, _ = unix.Read(l.efd, drained[:])
				l.accept()
				continue
			}
			if fd >= len(l.fds) {
				continue
			}
			// ev.Pad is the registration's number: an event of a
			// descriptor closed earlier in this batch, whose number a
			// new connection took since, is not the new one's.
			switch o := l.fds[fd].(type) {
			case *lconn:
				if o.gen == ev.Pad {
					o.event(ev.Events)
				}
			case *lpod:
				if o.gen == ev.Pad {
					o.event(ev.Events)
				}
			}
		}
		if l.abort.Load() {
			return
		}
		if l.ls.closing.Load() {
			l.closeIdle()
		}
		if l.now.Sub(l.swept) >= sweepEvery {
			l.sweep()
		}
		if l.ls.closing.Load() && l.clients == 0 {
			l.mu.Lock()
			empty := len(l.incoming) == 0
			l.mu.Unlock()
			if empty {
				return
			}
		}
	}
}

// accept takes the connections given to the loop.
func (l *loop) accept() {
	l.mu.Lock()
	in := l.incoming
	l.incoming = nil
	l.mu.Unlock()
	for _, c := range in {
		c.l = l
		c.fastConn = fastConn{p: l.ls.p, port: l.ls.port, ip: c.remote}
		if host, _, err := net.SplitHostPort(c.remote); err == nil {
			c.ip = host
		}
		if !l.register(c.fd, c) {
			unix.Close(c.fd)
			c.release()
			continue
		}
		l.clients++
		c.readable = true // what came before the registration
		c.due = l.now.Add(l.ls.t.Header)
		c.step()
	}
}

// runReady serves the connections whose next request is due: here, not
// from the end of the last one, so that a client pipelining requests
// does not grow the stack with each.
func (l *loop) runReady() {
	drain(&l.ready, func(c *lconn) {
		if c.state == stHead {
			c.readHead()
		}
	})
}

// runSends writes the request heads that became ready to go since the
// last epoll_wait (read from clients, pod connections just connected or
// writable again, retries) to their pods, together: a pod then finds
// several requests ready when it wakes rather than being woken for each
// (as Redis writes its replies before it sleeps). The metrics' and the
// log's durations end before the answer waits in answers, microseconds.
func (l *loop) runSends() {
	l.sending = true
	drain(&l.sends, func(c *lconn) {
		c.queued = false
		// Anything else moved on since it was queued: closed, failed,
		// or a retry on a new pod connection, sent when it connects.
		if c.state == stSend && c.pod != nil && !c.pod.connecting {
			c.send()
		}
	})
	l.sending = false
}

// runAnswers writes the whole answers of the batch to their clients, as
// runSends the requests to pods.
func (l *loop) runAnswers() {
	drain(&l.answers, func(c *lconn) {
		c.answering = false
		if c.state == stFlush {
			c.flush()
			if c.state == stFlush && len(c.out) == 0 {
				c.next()
			}
		}
	})
}

// drain calls f on each connection of q, those f adds included, and
// empties q. By index, not by reslicing from the front, which would
// shrink q's capacity until every append allocates.
func drain(q *[]*lconn, f func(*lconn)) {
	for i := 0; i < len(*q); i++ {
		f((*q)[i])
	}
	clear(*q)
	*q = (*q)[:0]
}

func (l *loop) register(fd int, o any) bool {
	l.gen++
	switch o := o.(type) {
	case *lconn:
		o.gen = l.gen
	case *lpod:
		o.gen = l.gen
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(fd), Pad: l.gen}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return false
	}
	for fd >= len(l.fds) {
		l.fds = append(l.fds, nil)
	}
	l.fds[fd] = o
	return true
}

func (l *loop) unregister(fd int) {
	_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	l.fds[fd] = nil
}

// closeIdle closes the client connections waiting for a request: the
// server is shutting down.
func (l *loop) closeIdle() {
	for _, o := range l.fds {
		if c, ok := o.(*lconn); ok && c.state == stHead && len(c.in) == 0 {
			c.close()
		}
	}
}

// sweep ends what waited too long, and idle pod connections past their
// time.
func (l *loop) sweep() {
	l.swept = l.now
	for _, o := range l.fds {
		// A head queued for its pod is written before the loop waits
		// again; its due is still the last wait's.
		if c, ok := o.(*lconn); ok && !c.queued && !c.due.IsZero() && !l.now.Before(c.due) {
			c.timeout()
		}
	}
	idleFor := l.ls.p.pods.idleTimeout
	for addr, list := range l.idle {
		keep := list[:0]
		for _, pc := range list {
			if l.now.Sub(pc.used) < idleFor {
				keep = append(keep, pc)
			} else {
				pc.close()
			}
		}
		if len(keep) == 0 {
			delete(l.idle, addr)
		} else {
			l.idle[addr] = keep
		}
	}
}

// The states of a client connection.
const (
	stHead   = iota // reading a request head
	stSend          // connecting to a pod, writing the head to it
	stAnswer        // waiting for the answer's head
	stBody          // passing the answer's body on
	stFlush         // writing the rest of the answer
	stGone          // closed, or moved off the loop
)

// lconn is a client connection on a loop.
type lconn struct {
	fastConn
	l        *loop
	fd       int
	remote   string
	release  func()
	gen      int32
	state    int
	readable bool // the socket may have bytes: not read to EAGAIN since its last event
	rdhup    bool // the client shut its side: read until EOF
	lastErr  error
	in       []byte
	headLen  int
	out      []byte    // for the client, not written yet
	due      time.Time // when its wait times out (sweep); zero: none

	r         *request
	tried     int   // endpoints tried
	pod       *lpod // the pod connection of the request
	sent      int   // of the head, to pod
	left      int64 // of the body, to read from the pod
	status    int
	bytes     int64
	keep      bool
	podClose  bool // the pod closes its connection after this answer
	queued    bool // in the loop's sends
	answering bool // in the loop's answers
}

// lpod is a connection from a loop to a pod.
type lpod struct {
	l          *loop
	fd         int
	gen        int32
	addr       string
	c          *lconn // the request it serves; nil while idle
	buf        []byte // read from the pod, from off
	off        int
	readable   bool
	connecting bool
	reused     bool
	used       time.Time
}

func (c *lconn) event(ev uint32) {
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
func (c *lconn) step() {
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
func (c *lconn) readHead() {
	for {
		if len(c.in) > 0 {
			n, ok := h1.ParseRequest(c.in, &c.req)
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
		if c.l.ls.closing.Load() && len(c.in) == 0 {
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
		if len(c.in) == 0 && c.due.Sub(c.l.now) > c.l.ls.t.Header {
			// Idle until now: the head is due within the header timeout.
			c.due = c.l.now.Add(c.l.ls.t.Header)
		}
		c.in = c.in[:len(c.in)+n]
	}
}

// begin starts serving the request whose head was read.
func (c *lconn) begin() {
	r, ok := c.route()
	if !ok {
		c.toNetHTTP()
		return
	}
	c.r, c.tried, c.bytes, c.status, c.due, c.lastErr = r, 0, 0, 0, time.Time{}, nil
	c.writeHead(r)
	c.state = stSend
	c.tryEndpoint()
}

// tryEndpoint sends the request to the next endpoint not tried yet, or
// answers the client 502 when none is left.
func (c *lconn) tryEndpoint() {
	r := c.r
	n := len(r.eps)
	if c.tried >= n {
		err := c.lastErr
		if err == nil {
			err = dialError{errors.New("every endpoint failed")}
		}
		c.failWith(err)
		return
	}
	r.upstream = r.eps[(r.start+c.tried)%n]
	c.tried++
	c.connect(true)
}

// connect sends the head on an idle connection to r.upstream, or a new
// one (reuse false: a new one).
func (c *lconn) connect(reuse bool) {
	l, r := c.l, c.r
	var pc *lpod
	if list := l.idle[r.upstream]; reuse && len(list) > 0 {
		pc = list[len(list)-1]
		if len(list) == 1 {
			delete(l.idle, r.upstream)
		} else {
			l.idle[r.upstream] = list[:len(list)-1]
		}
		pc.reused = true
	} else {
		var err error
		if pc, err = l.dial(r.upstream); err != nil {
			c.lastErr = dialError{err}
			c.l.ls.p.metrics.connectErrors.Inc()
			c.tryEndpoint()
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

func (c *lconn) connectTimeout() time.Duration {
	if t := c.r.cfg.ConnectTimeout; t > 0 {
		return t
	}
	if t := c.l.ls.p.pods.dialer.Timeout; t > 0 {
		return t
	}
	return 5 * time.Second
}

func (c *lconn) readTimeout() time.Duration {
	if t := c.r.cfg.ReadTimeout; t > 0 {
		return t
	}
	return c.l.ls.p.pods.readTimeout
}

// dial starts a connection to addr ("ip:port").
func (l *loop) dial(addr string) (*lpod, error) {
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
	pc := &lpod{l: l, fd: fd, addr: addr, buf: make([]byte, 0, 16<<10)}
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
func (c *lconn) send() {
	if !c.l.sending {
		if !c.queued {
			c.queued = true
			c.l.sends = append(c.l.sends, c)
		}
		return
	}
	pc := c.pod
	for c.sent < len(c.header) {
		n, err := unix.Write(pc.fd, c.header[c.sent:])
		if err == unix.EAGAIN {
			wait := c.r.cfg.SendTimeout
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

// podFailed handles a pod connection that failed before its answer's
// head, as exchange and send do: a kept-alive connection the pod had
// closed is replaced, and an idempotent request that nothing was
// answered to goes to the next endpoint.
func (c *lconn) podFailed(err error) {
	pc := c.pod
	reused := pc.reused
	pc.close()
	c.pod = nil
	method := string(c.req.Method)
	switch {
	case reused && !isTimeout(err) && idempotent(method):
		c.connect(false)
	case answeredNothing(err) && idempotent(method):
		c.tryEndpoint()
	default:
		c.failWith(err)
	}
}

// failWith answers the client 502 or 504 for err.
func (c *lconn) failWith(err error) {
	c.out, c.status = c.appendFailure(c.out, err)
	c.keep = true
	c.done()
}

func (pc *lpod) event(ev uint32) {
	if ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		pc.readable = true
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
			c.lastErr = dialError{err}
			c.l.ls.p.metrics.connectErrors.Inc()
			pc.close()
			c.pod = nil
			c.tryEndpoint()
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
func (pc *lpod) step() {
	c := pc.c
	for c != nil && pc.c == c && (c.state == stAnswer || c.state == stBody) && pc.readable && len(c.out) == 0 {
		if len(pc.buf) == cap(pc.buf) {
			if c.state == stAnswer {
				c.toGoroutine() // a head larger than the buffer
				return
			}
			pc.buf, pc.off = pc.buf[:0], 0
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
			if c.state == stAnswer && len(pc.buf) == 0 {
				c.podFailed(err)
			} else {
				// Half an answer: only closing tells the client (a head
				// cut short is answered 502, as ServeConn does).
				if c.state == stAnswer {
					pc.close()
					c.pod = nil
					c.failWith(err)
					return
				}
				c.abandon()
			}
			return
		}
		if n < len(room) {
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
func (c *lconn) answerHead() {
	pc := c.pod
	for {
		b := pc.buf[pc.off:]
		n, ok := h1.ParseResponse(b, &c.resp)
		if !ok {
			c.toGoroutine()
			return
		}
		if n == 0 {
			return // more to come
		}
		if c.resp.Status >= 200 {
			pc.off += n
			break
		}
		pc.off += n // 100 Continue and other informational answers are not passed on
	}
	resp := &c.resp
	noBody := h1.NoBody(c.req.Method, resp.Status)
	if !noBody && resp.ContentLength < 0 {
		// Chunked, or until the pod closes: the goroutine re-frames it.
		c.toGoroutine()
		return
	}
	c.status = resp.Status
	c.podClose = resp.Close
	c.out = c.appendAnswerHead(c.out, noBody)
	c.left = 0
	if !noBody {
		c.left = resp.ContentLength
	}
	c.state = stBody
	c.due = time.Time{} // the body takes its time
	c.passBody()
}

// passBody moves what the pod sent of the body to the client.
func (c *lconn) passBody() {
	pc := c.pod
	take := min(int64(len(pc.buf)-pc.off), c.left)
	c.out = append(c.out, pc.buf[pc.off:pc.off+int(take)]...)
	pc.off += int(take)
	c.left -= take
	c.bytes += take
	if pc.off == len(pc.buf) {
		pc.buf, pc.off = pc.buf[:0], 0
	}
	if c.left == 0 {
		// The whole answer is read: the pod connection can serve another
		// request, unless the pod sent more than the answer or said it
		// closes.
		if c.podClose || pc.off != len(pc.buf) {
			pc.close()
		} else {
			c.l.putIdle(pc)
		}
		c.pod = nil
		c.keep = true
		c.done()
		return
	}
	c.flush()
}

// done ends the request: its answer is in c.out.
func (c *lconn) done() {
	c.finish(c.r, c.remote, c.status, c.bytes)
	c.r = nil
	c.keep = c.keep && !c.req.Close && !c.l.ls.closing.Load()
	c.state = stFlush
	if !c.answering {
		c.answering = true
		c.l.answers = append(c.l.answers, c)
	}
}

// next goes on with the next request, or closes the connection.
func (c *lconn) next() {
	if !c.keep {
		c.close()
		return
	}
	c.in = c.in[:copy(c.in, c.in[c.headLen:])]
	c.headLen = 0
	c.state = stHead
	c.due = c.l.now.Add(c.l.ls.t.Idle)
	if len(c.in) > 0 {
		c.due = c.l.now.Add(c.l.ls.t.Header)
	}
	c.l.ready = append(c.l.ready, c)
}

// flush writes c.out to the client, as far as it takes it.
func (c *lconn) flush() {
	for len(c.out) > 0 {
		n, err := unix.Write(c.fd, c.out)
		if err == unix.EAGAIN {
			return
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			c.abandon()
			return
		}
		c.out = c.out[:copy(c.out, c.out[n:])]
	}
}

// abandon closes the client and the pod connection of its request.
func (c *lconn) abandon() {
	if c.pod != nil {
		c.pod.close()
		c.pod = nil
	}
	if c.r != nil && c.status != 0 {
		c.finish(c.r, c.remote, c.status, c.bytes)
		c.r = nil
	}
	c.close()
}

// timeout ends what waited too long.
func (c *lconn) timeout() {
	switch c.state {
	case stHead:
		c.close() // the head did not come in time, or idle too long
	case stSend:
		if c.pod != nil && c.pod.connecting {
			c.pod.close()
			c.pod = nil
			c.lastErr = dialError{os.ErrDeadlineExceeded}
			c.l.ls.p.metrics.connectErrors.Inc()
			c.tryEndpoint()
			return
		}
		c.podFailed(os.ErrDeadlineExceeded)
	case stAnswer:
		c.pod.close()
		c.pod = nil
		c.failWith(os.ErrDeadlineExceeded)
	}
}

func (c *lconn) close() {
	if c.state == stGone {
		return
	}
	c.state = stGone
	c.l.unregister(c.fd)
	unix.Close(c.fd)
	c.l.clients--
	c.release()
}

func (pc *lpod) close() {
	if pc.fd < 0 {
		return
	}
	pc.l.unregister(pc.fd)
	unix.Close(pc.fd)
	pc.fd = -1
	pc.c = nil
}

func (l *loop) putIdle(pc *lpod) {
	pc.c, pc.used, pc.reused = nil, l.now, false
	if list := l.idle[pc.addr]; len(list) < l.maxIdle {
		l.idle[pc.addr] = append(list, pc)
		if pc.readable {
			l.dropIdle(pc) // closed by the pod meanwhile
		}
		return
	}
	pc.close()
}

func (l *loop) dropIdle(pc *lpod) {
	list := l.idle[pc.addr]
	for i, o := range list {
		if o == pc {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(l.idle, pc.addr)
	} else {
		l.idle[pc.addr] = list
	}
	pc.close()
}

// toNetHTTP gives the connection, with what was read, to net/http.
func (c *lconn) toNetHTTP() {
	nc := c.detach()
	if nc == nil {
		return
	}
	c.l.ls.handoff(&bufferedConn{Conn: nc, br: bufio.NewReaderSize(io.MultiReader(bytes.NewReader(c.in), nc), clientBuffer)})
}

// detach takes the client connection off the loop, as a net.Conn that
// releases its slot when closed; nil when that failed (the connection is
// then closed).
func (c *lconn) detach() net.Conn {
	c.state = stGone
	c.l.unregister(c.fd)
	c.l.clients--
	f := os.NewFile(uintptr(c.fd), "")
	nc, err := net.FileConn(f) // a duplicate, on Go's poller
	f.Close()
	if err != nil {
		c.release()
		return nil
	}
	return &releasingConn{Conn: nc, release: c.release}
}

// toGoroutine moves the request, its pod connection and its client to
// a goroutine that answers as ServeConn does, from the answer's start:
// all the pod sent is read again there (informational answers before
// the final one are skipped there too).
func (c *lconn) toGoroutine() {
	pc := c.pod
	pending := append([]byte(nil), pc.buf...)
	pc.l.unregister(pc.fd)
	f := os.NewFile(uintptr(pc.fd), "")
	pnc, err := net.FileConn(f)
	f.Close()
	pc.fd, pc.c, c.pod = -1, nil, nil
	rest := append([]byte(nil), c.in[c.headLen:]...)
	r, remote := c.r, c.remote
	nc := c.detach()
	if nc == nil || err != nil {
		if nc != nil {
			nc.Close()
		}
		if pnc != nil {
			pnc.Close()
		}
		return
	}
	fc := c.fastConn // its request head stays in c.in, which goes with it
	fc.c = nc
	fc.br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(rest), nc), clientBuffer)
	fc.bw = bufio.NewWriterSize(nc, clientBuffer)
	pod := &podConn{Conn: pnc, br: bufio.NewReaderSize(io.MultiReader(bytes.NewReader(pending), pnc), 16<<10), bw: bufio.NewWriterSize(pnc, 8<<10)}
	_ = pod.SetReadDeadline(fc.now.Add(c.readTimeout()))
	pod.readBy = fc.now.Add(c.readTimeout())
	ls := c.l.ls
	ls.mu.Lock()
	ls.conns[nc] = struct{}{}
	ls.pods[pnc] = struct{}{}
	ls.wg.Add(1)
	ls.mu.Unlock()
	go func() {
		defer ls.wg.Done()
		status, n, keep := fc.answer(r, pod)
		ls.mu.Lock()
		delete(ls.pods, pnc) // pooled or closed by now
		ls.mu.Unlock()
		fc.finish(r, remote, status, n)
		var next net.Conn
		if err := fc.bw.Flush(); err == nil && keep && !fc.req.Close {
			next = fc.run(ls.t, ls.closing.Load, ls.t.Idle)
		} else {
			nc.Close()
		}
		ls.mu.Lock()
		delete(ls.conns, nc)
		ls.mu.Unlock()
		if next != nil {
			ls.handoff(next)
		}
	}()
}

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
