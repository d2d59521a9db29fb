package core

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// closeSignal is the API server's end of a client connection: it says
// when the proxy has ended the session (half-closed or closed it), and
// holds up to 2 MiB of output the client has not read yet.
type closeSignal struct {
	*net.TCPConn
	once  sync.Once
	ended chan struct{}
}

func (c *closeSignal) end()              { c.once.Do(func() { close(c.ended) }) }
func (c *closeSignal) CloseWrite() error { defer c.end(); return c.TCPConn.CloseWrite() }
func (c *closeSignal) Close() error      { defer c.end(); return c.TCPConn.Close() }

type signalListener struct {
	net.Listener
	conns chan *closeSignal
}

func (l signalListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := c.(*net.TCPConn)
	_ = tc.SetWriteBuffer(1 << 20)
	cs := &closeSignal{TCPConn: tc, ended: make(chan struct{})}
	l.conns <- cs
	return cs, nil
}

// TestStreamProxyClientReadsAll: a client still sending after the node's
// side of an exec or attach session has ended (kubectl closes its stdin
// stream once the node resets it), while the proxy holds output the
// client has not read yet, gets all of that output and then the end.
// The proxy closed the client's connection at once: the late bytes made
// the kernel reset it and drop the output it had not sent, and the
// client read a part (kubectl 1.27 printed 7082 of 8911 bytes, exit 0).
func TestStreamProxyClientReadsAll(t *testing.T) {
	const size = 256 << 10
	payload := []byte(strings.Repeat("0123456789abcdef", size/16))
	// The node: upgrades, writes the output, ends its side and closes
	// once the proxy has (as the node agent's lingering connections).
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n")
		_, _ = conn.Write(payload)
		_ = conn.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, conn)
	}))
	defer node.Close()
	loc, _ := url.Parse(node.URL + "/attach/default/web/c")
	api := httptest.NewUnstartedServer(streamToNode(loc, &http.Transport{}, nil, true, true, true, false))
	conns := make(chan *closeSignal, 1)
	api.Listener = signalListener{api.Listener, conns}
	api.Start()
	defer api.Close()

	// The client reads nothing until the proxy has ended: a small
	// receive buffer leaves most of the output queued at the proxy.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", api.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /attach HTTP/1.1\r\nHost: api\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n")
	var server *closeSignal
	select {
	case server = <-conns:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy took no connection")
	}
	select {
	case <-server.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy never ended the session")
	}
	// A late frame, then a moment for the proxy's kernel to take it.
	if _, err := conn.Write([]byte("late stdin end")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)

	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the upgrade's response: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got, err := io.ReadAll(br)
	if err != nil || len(got) != size {
		t.Fatalf("the client read %d of %d bytes, then %v", len(got), size, err)
	}
}
