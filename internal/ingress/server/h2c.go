package server

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// h2cPreface opens every HTTP/2 connection made with prior knowledge.
var h2cPreface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// splitH2C splits l's connections by their first bytes: those that open
// with HTTP/2's preface are accepted from h2, the others from h1. net/http
// can tell them apart itself, but it waits for 14 bytes first, so that a
// shorter HTTP/1 request (a bare "GET /", a client that sends its request
// line in pieces) got no answer until the header timeout; here the first
// byte that differs from the preface decides, at once. Sniffing runs on
// the connection's own goroutine, never in the accept loop; timeout
// bounds it, and a connection that sent nothing by then is closed.
func splitH2C(l net.Listener, timeout time.Duration) (h1, h2 net.Listener) {
	s := &h2cSplit{l: l, timeout: timeout, done: make(chan struct{})}
	s.h1 = &splitListener{s: s, conns: make(chan net.Conn)}
	s.h2 = &splitListener{s: s, conns: make(chan net.Conn)}
	go s.accept()
	return s.h1, s.h2
}

type h2cSplit struct {
	l       net.Listener
	timeout time.Duration
	h1, h2  *splitListener

	once sync.Once
	done chan struct{}
	err  error // why done closed
}

func (s *h2cSplit) close(err error) {
	s.once.Do(func() {
		s.err = err
		close(s.done)
		s.l.Close()
	})
}

// accept hands each connection to sniff. Temporary failures (out of
// file descriptors, a connection aborted before it was accepted) are
// waited out as net/http's Serve does, 5 ms doubling to 1 s: under load
// the port slows down rather than stops.
func (s *h2cSplit) accept() {
	var wait time.Duration
	for {
		c, err := s.l.Accept()
		if err != nil {
			if temporary(err) {
				if backoff(&wait, s.done) {
					continue
				}
				return
			}
			s.close(err)
			return
		}
		wait = 0
		go s.sniff(c)
	}
}

// backoff waits out a temporary accept failure, 5 ms doubling to 1 s
// (wait holds the last wait), unless stop closes first: false then.
func backoff(wait *time.Duration, stop <-chan struct{}) bool {
	*wait = min(max(2**wait, 5*time.Millisecond), time.Second)
	select {
	case <-time.After(*wait):
		return true
	case <-stop:
		return false
	}
}

func temporary(err error) bool {
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// sniff reads until the bytes read differ from the preface or are all of
// it, and hands the connection on with those bytes put back.
func (s *h2cSplit) sniff(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(s.timeout))
	buf := make([]byte, 0, len(h2cPreface))
	for len(buf) < len(h2cPreface) && bytes.HasPrefix(h2cPreface, buf) {
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			break
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	if len(buf) == 0 {
		c.Close() // nothing sent: no request to answer
		return
	}
	to := s.h1
	if bytes.Equal(buf, h2cPreface) {
		to = s.h2
	}
	select {
	case to.conns <- &replayConn{Conn: c, pending: buf}:
	case <-s.done:
		c.Close()
	}
}

// splitListener is one side of a split.
type splitListener struct {
	s     *h2cSplit
	conns chan net.Conn
}

func (l *splitListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.s.done:
		return nil, l.s.err
	}
}

// Close closes the listener underneath, and with it both sides: the
// servers of both stop together.
func (l *splitListener) Close() error {
	l.s.close(net.ErrClosed)
	return nil
}

func (l *splitListener) Addr() net.Addr { return l.s.l.Addr() }

// replayConn reads pending before the connection's own bytes.
type replayConn struct {
	net.Conn
	pending []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// NetConn is the connection underneath.
func (c *replayConn) NetConn() net.Conn { return c.Conn }
