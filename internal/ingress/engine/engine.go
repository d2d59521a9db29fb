// Package engine serves plain HTTP/1.1 client connections the way nginx's
// workers do: event loops, each waiting on an epoll set of its own for its
// client connections and its own connections to pods, and moving a
// request along when its socket is ready, with no goroutine per
// connection; one epoll_wait hands over the ready sockets of many
// connections at once, where a goroutine per connection parks and is
// woken for each read.
//
// The engine frames the common request — a head h1 reads, no body, no
// upgrade — and every answer h1 reads the head of: by length, in chunks,
// or until the pod closes (passed on in chunks). It asks its Handler
// where a request goes and follows the upstream package's next-upstream
// rules. What it does not frame goes to net/http, the single fallback: a
// request the Handler or h1 declines goes there with its bytes and its
// connection; an answer whose head h1 declines (larger than the pod
// buffer, or unusual) is read by net/http's response reader on a
// goroutine, after which the connection comes back to a loop.
package engine

import (
	"context"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ingress/h1"
	"github.com/svcnet/svcnet/internal/ingress/route"
	"github.com/svcnet/svcnet/internal/ingress/upstream"
)

// Handler decides and records the requests of an engine.
type Handler interface {
	// Route decides the request whose head is in x: its endpoints, where
	// it starts among them and its timeouts. false leaves the request,
	// and its connection, to net/http.
	Route(x *Exchange) bool
	// Done records a request answered (metrics, access log), before its
	// exchange is reused.
	Done(x *Exchange)
	// DialFailed counts a failed connection to a pod.
	DialFailed()
	// WriteTimedOut counts a client connection closed because the client
	// took none of its answer for Options.Write.
	WriteTimedOut()
}

// Exchange is one request of a client connection, from its head to its
// answer; a connection reuses its own.
type Exchange struct {
	// Head is the client's request head, a view of the connection's
	// buffer; Host and Path are its host and path as strings, kept from
	// the connection's last request when they are the same.
	Head       h1.Request
	Host, Path string
	// Remote is the client's address, Port the listener's port.
	Remote, Port string
	// Began is when the head was read.
	Began time.Time

	// Set by Handler.Route.
	Route     *route.Route
	Up        *upstream.Upstream
	Endpoints []string
	Start     int
	Timeouts  upstream.Timeouts
	// Data is the handler's, kept across a connection's requests.
	Data any

	// Set by the engine.
	Upstream string // the endpoint that answered, or failed last
	ID       []byte // X-Request-ID, as the pod got it
	Status   int
	Bytes    int64
}

// Options are an engine's.
type Options struct {
	// Loops is the number of event loops (at least one).
	Loops int
	// Port is the listener's, for X-Forwarded-Port.
	Port int
	// Header bounds the wait for a request's head, Idle a kept-alive
	// connection's wait for its next request.
	Header, Idle time.Duration
	// Write bounds the wait for a client to take any byte of its answer,
	// as nginx's send_timeout: the time between two writes that make
	// progress, not the whole answer's; the connection is closed after
	// it. 0: no bound.
	Write time.Duration
	// Connect bounds connecting to a pod, Read the wait for an answer's
	// head, unless the exchange's timeouts say otherwise.
	Connect, Read time.Duration
	// MaxIdle is the number of idle connections kept per pod, over all
	// loops.
	MaxIdle int
	// ToNetHTTP gives net/http a connection, with what was read from it
	// in front; it must not wait for net/http.
	ToNetHTTP func(net.Conn)
}

// DefaultLoops is the number of event loops when none is given: half
// the CPUs Go may use, at least one. A loop serves tens of thousands of
// requests a second on one core; fewer loops handle more ready sockets
// per epoll_wait and leave the other cores to the backends and clients of
// the same machine.
func DefaultLoops() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// Engine is a set of event loops serving one listener's connections.
type Engine struct {
	h       Handler
	o       Options
	port    string
	loops   []*loop
	next    atomic.Uint32
	closing atomic.Bool

	// Connections moved to goroutines, client and pod, for Shutdown:
	// closing the pod's wakes a goroutine waiting for a quiet answer.
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	done  sync.WaitGroup // the loops
}

// New starts an engine's loops; it fails when the kernel gives no epoll
// set or eventfd.
func New(h Handler, o Options) (*Engine, error) {
	o.Loops = max(o.Loops, 1)
	e := &Engine{h: h, o: o, port: strconv.Itoa(o.Port), conns: map[net.Conn]struct{}{}}
	for range o.Loops {
		l, err := newLoop(e, max(o.MaxIdle/o.Loops, 1))
		if err != nil {
			for _, l := range e.loops {
				l.exit()
			}
			return nil, err
		}
		e.loops = append(e.loops, l)
	}
	for _, l := range e.loops {
		e.done.Add(1)
		go func() { defer e.done.Done(); l.run() }()
	}
	return e, nil
}

// Serve gives c, a TCP connection, to a loop with the bytes read from it
// already. release is called once the connection closes (its slot in a
// connection limit); c itself is closed at once — the loop keeps a
// duplicate of its descriptor, away from Go's poller.
func (e *Engine) Serve(c net.Conn, pending []byte, release func()) {
	remote := c.RemoteAddr().String()
	fd := -1
	var err error
	sc, ok := c.(syscall.Conn)
	if ok {
		var rc syscall.RawConn
		if rc, err = sc.SyscallConn(); err == nil {
			_ = rc.Control(func(s uintptr) { fd, err = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) })
		}
	}
	c.Close()
	if fd < 0 || err != nil {
		release()
		return
	}
	l := e.loops[e.next.Add(1)%uint32(len(e.loops))]
	in := append(make([]byte, 0, max(clientBuffer, len(pending))), pending...)
	l.add(&conn{fd: fd, release: release, in: in, x: Exchange{Remote: remote, Port: e.port}})
}

// Shutdown ends the connections as net/http's Shutdown does: those
// waiting for a request at once, those in a request after its answer;
// ctx bounds the wait, then the rest are closed.
func (e *Engine) Shutdown(ctx context.Context) {
	e.closing.Store(true)
	for _, l := range e.loops {
		l.wake()
	}
	done := make(chan struct{})
	go func() { e.done.Wait(); e.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		for _, l := range e.loops {
			l.abort.Store(true)
			l.wake()
		}
		e.mu.Lock()
		for c := range e.conns {
			c.Close()
		}
		e.mu.Unlock()
		<-done
	}
}

// track keeps the connections a goroutine serves for Shutdown.
func (e *Engine) track(cs ...net.Conn) {
	e.mu.Lock()
	for _, c := range cs {
		e.conns[c] = struct{}{}
	}
	e.wg.Add(1)
	e.mu.Unlock()
}

func (e *Engine) untrack(cs ...net.Conn) {
	e.mu.Lock()
	for _, c := range cs {
		delete(e.conns, c)
	}
	e.mu.Unlock()
	e.wg.Done()
}
