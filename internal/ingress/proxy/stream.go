package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"

	"github.com/svcnet/svcnet/internal/ingress/route"
)

// helloTimeout bounds the wait for a TLS connection's ClientHello.
const helloTimeout = 10 * time.Second

// helloLimit is the most a ClientHello may take before it is refused.
const helloLimit = 64 << 10

// StreamListener tells, for a TLS server name, the Gateway listener that
// serves it on a stream port: its certificate when the proxy terminates
// TLS, nil when it passes the connection through; ok false when no
// listener takes the name.
type StreamListener func(serverName string) (cert *tls.Certificate, ok bool)

// ServeStream serves a port of TLS listeners until l is closed: each
// connection's ClientHello is read, its SNI chooses the listener (pick)
// and the route (the router of port), and the connection is joined to
// one of the route's backend endpoints, as it is (TLS passthrough) or
// after the proxy has terminated TLS with the listener's certificate.
// A connection nothing routes is closed.
func (p *Proxy) ServeStream(l net.Listener, port int, pick StreamListener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		go p.stream(c, port, pick)
	}
}

var errHelloRead = errors.New("client hello read")

func (p *Proxy) stream(c net.Conn, port int, pick StreamListener) {
	defer c.Close()
	rec := &recordingConn{Conn: c}
	_ = c.SetReadDeadline(time.Now().Add(helloTimeout))
	var sni string
	_ = tls.Server(rec, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		sni = h.ServerName
		return nil, errHelloRead
	}}).Handshake()
	_ = c.SetReadDeadline(time.Time{})
	if sni == "" || rec.buf.Len() > helloLimit {
		p.metrics.streams.WithLabelValues("no_sni").Inc()
		return
	}
	cert, ok := pick(sni)
	cfg := p.cfg.Load()
	if !ok || cfg == nil {
		p.metrics.streams.WithLabelValues("no_listener").Inc()
		return
	}
	rt := cfg.router.Route(&route.Request{Host: sni, Path: "/", Port: port, Header: func(string) string { return "" }})
	if rt == nil || rt.Backend < 0 {
		p.metrics.streams.WithLabelValues("no_route").Inc()
		return
	}
	up := cfg.ups[rt.Backend]
	eps := up.Load().Addrs
	var back net.Conn
	var err error
	for i, start := 0, 0; i < len(eps); i++ {
		if i == 0 {
			start = up.Pick(len(eps))
		}
		if back, err = net.DialTimeout("tcp", eps[(start+i)%len(eps)], p.opts.ConnectTimeout); err == nil {
			break
		}
		p.metrics.connectErrors.Inc()
	}
	if back == nil {
		p.metrics.streams.WithLabelValues("no_endpoint").Inc()
		return
	}
	defer back.Close()
	client := net.Conn(&replayConn{Conn: c, pending: rec.buf.Bytes()})
	if cert != nil {
		t := tls.Server(client, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}})
		_ = c.SetDeadline(time.Now().Add(helloTimeout))
		if err := t.Handshake(); err != nil {
			p.metrics.streams.WithLabelValues("handshake_failed").Inc()
			return
		}
		_ = c.SetDeadline(time.Time{})
		client = t
	}
	p.metrics.streams.WithLabelValues("joined").Inc()
	join(client, back)
}

// streamLinger is how long a joined connection waits for its second
// direction to end once the first has: a half-closed peer that never
// closes does not hold the connection for ever.
const streamLinger = time.Minute

// join copies both ways until both directions have ended (the second
// within streamLinger of the first), passing each end on as a half
// close; the caller closes both.
func join(a, b net.Conn) {
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
		done <- struct{}{}
	}
	go pipe(b, a)
	go pipe(a, b)
	<-done
	select {
	case <-done:
	case <-time.After(streamLinger):
	}
}

// recordingConn keeps what is read from it, and writes nothing: the
// ClientHello is read for its SNI only.
type recordingConn struct {
	net.Conn
	buf bytes.Buffer
}

func (c *recordingConn) Read(b []byte) (int, error) {
	if c.buf.Len() > helloLimit {
		return 0, errHelloRead
	}
	n, err := c.Conn.Read(b)
	c.buf.Write(b[:n])
	return n, err
}

func (c *recordingConn) Write(b []byte) (int, error) { return 0, errHelloRead }

// replayConn reads pending before the connection's own bytes.
type replayConn struct {
	net.Conn
	pending []byte
}

func (c *replayConn) Read(b []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(b, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// CloseWrite half-closes the client's connection.
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
