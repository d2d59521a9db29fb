package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/ingress/proxy"
	"github.com/svcnet/svcnet/internal/ingress/route"
)

// TestServePlain serves the plain listener as the ingress does, the
// engine first: a request it leaves to net/http is answered there, a connection
// over the limit gets its 503, and shutting down closes a connection that
// waits for its first request at once.
func TestServePlain(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := proxy.New(proxy.Options{})
	t.Cleanup(px.Close)
	px.Set(&route.Table{}, nil) // no route: every request is net/http's 404
	ll := &Listener{Listener: l, Limit: NewLimit(2)}
	srv := New()
	// Without the HTTP/2 split, whose sniffing holds a connection that
	// sent nothing (up to the header timeout) before any server has it.
	srv.Serve(ll, px.Handler(ll.Port()), nil, false, px)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			srv.Shutdown()
		}
	})
	dial := func() net.Conn {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return c
	}
	status := func(c net.Conn) int {
		t.Helper()
		fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	idle := dial()
	_ = idle.SetReadDeadline(time.Now().Add(3 * time.Second)) // before the 10 s header timeout
	// The idle connection is counted once accepted; wait for that.
	for deadline := time.Now().Add(5 * time.Second); ll.Limit.open.Load() < 1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := status(dial()); got != http.StatusNotFound {
		t.Fatalf("no route: %d, want 404 from net/http", got)
	}
	if got := status(dial()); got != http.StatusServiceUnavailable {
		t.Fatalf("over the limit: %d, want 503", got)
	}
	done := make(chan struct{})
	go func() { srv.Shutdown(); close(done) }()
	stopped = true
	if n, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("an idle connection at shutdown: read %d, %v; want it closed", n, err)
	}
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("shutdown waited for a connection with no request, as if it were busy") // its grace is 5 s
	}
}
