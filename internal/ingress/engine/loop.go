package engine

import (
	"crypto/rand"
	mrand "math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ingress/h1"
	"github.com/svcnet/svcnet/internal/ingress/upstream"
)

// A loop owns an epoll set, the client connections given to it and its
// connections to pods; only its goroutine touches them.
type loop struct {
	e     *Engine
	epfd  int
	efd   int // an eventfd: new connections, shutdown
	abort atomic.Bool

	mu       sync.Mutex
	incoming []*conn
	exited   bool // efd and epfd are closed: nothing more is added

	fds     []any   // by descriptor: *conn or *pod
	gen     int32   // the last registration's number
	ready   []*conn // whose next request is to be read (runReady)
	sends   []*conn // whose head is to be written to its pod (runSends)
	sending bool    // in runSends: send writes
	answers []*conn // whose answer is to be written to the client (runAnswers)
	clients int
	idle    *upstream.Idle[*pod]
	ids     *mrand.ChaCha8 // X-Request-IDs, seeded from crypto/rand
	events  [128]unix.EpollEvent
	now     time.Time
	swept   time.Time
}

func newLoop(e *Engine, maxIdle int) (*loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	var seed [32]byte
	_, _ = rand.Read(seed[:])
	l := &loop{e: e, epfd: epfd, efd: efd, idle: upstream.NewIdle[*pod](maxIdle), ids: mrand.NewChaCha8(seed)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, efd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(efd)}); err != nil {
		unix.Close(epfd)
		unix.Close(efd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	return l, nil
}

func (l *loop) add(c *conn) {
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
			case *conn:
				o.close()
			case *pod:
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
		if l.finished() {
			return
		}
		wait := -1
		if l.clients > 0 || !l.idle.Empty() {
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
			case *conn:
				if o.gen == ev.Pad {
					o.event(ev.Events)
				}
			case *pod:
				if o.gen == ev.Pad {
					o.event(ev.Events)
				}
			}
		}
		if l.abort.Load() {
			return
		}
		if l.e.closing.Load() {
			l.closeIdle()
		}
		if l.now.Sub(l.swept) >= sweepEvery {
			l.sweep()
		}
	}
}

// finished reports whether the engine is closing and the loop has no
// client connection left, nor any given to it: it may return. Checked
// before every wait, which nothing might end otherwise.
func (l *loop) finished() bool {
	if !l.e.closing.Load() || l.clients > 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.incoming) == 0
}

// accept takes the connections given to the loop.
func (l *loop) accept() {
	l.mu.Lock()
	in := l.incoming
	l.incoming = nil
	l.mu.Unlock()
	for _, c := range in {
		c.l = l
		c.ip = c.x.Remote
		if host, _, err := net.SplitHostPort(c.ip); err == nil {
			c.ip = host
		}
		c.fwd = h1.Forwarded{For: c.ip, Proto: "http", Port: c.x.Port}
		if !l.register(c.fd, c) {
			unix.Close(c.fd)
			c.release()
			continue
		}
		l.clients++
		c.readable = true // what came before the registration
		c.due = l.now.Add(l.e.o.Header)
		c.step()
	}
}

// runReady serves the connections whose next request is due: here, not
// from the end of the last one, so that a client pipelining requests
// does not grow the stack with each.
func (l *loop) runReady() {
	drain(&l.ready, func(c *conn) {
		if c.state == stHead {
			c.readHead()
		}
	})
}

// runSends writes the request heads that became ready to go since the
// last epoll_wait (read from clients, pod connections just connected or
// writable again, retries) to their pods, together: a pod then finds
// several requests ready when it wakes rather than being woken for each
// (as Redis writes its replies before it sleeps).
func (l *loop) runSends() {
	l.sending = true
	drain(&l.sends, func(c *conn) {
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
	drain(&l.answers, func(c *conn) {
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
func drain(q *[]*conn, f func(*conn)) {
	for i := 0; i < len(*q); i++ {
		f((*q)[i])
	}
	clear(*q)
	*q = (*q)[:0]
}

func (l *loop) register(fd int, o any) bool {
	l.gen++
	switch o := o.(type) {
	case *conn:
		o.gen = l.gen
	case *pod:
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
		if c, ok := o.(*conn); ok && c.state == stHead && len(c.in) == 0 {
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
		if c, ok := o.(*conn); ok && !c.queued && !c.due.IsZero() && !l.now.Before(c.due) {
			c.timeout()
		}
	}
	l.idle.Expire(l.now.Add(-upstream.IdleTimeout), (*pod).close)
}

// putIdle keeps a pod connection whose answer was read to its end.
func (l *loop) putIdle(pc *pod) {
	pc.c, pc.reused = nil, false
	if !l.idle.Put(pc.addr, pc, l.now) {
		pc.close()
		return
	}
	if pc.readable {
		l.dropIdle(pc) // closed by the pod meanwhile
	}
}

// dropIdle closes an idle connection the pod closed (or sent what it
// should not on).
func (l *loop) dropIdle(pc *pod) {
	l.idle.Remove(pc.addr, pc)
	pc.close()
}
