package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestLoopsPassLargeAnswers: an answer larger than every buffer on the
// way reaches a client that reads it slowly whole and in order, and the
// connection then serves the next request (the loop stops reading the
// pod while the client's socket is full, and goes on when it drains).
func TestLoopsPassLargeAnswers(t *testing.T) {
	body := make([]byte, 8<<20)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	pod := rawPod(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(body))
			if _, err := c.Write(body); err != nil {
				return
			}
		}
	})
	p := New(Options{})
	t.Cleanup(p.Close)
	p.Set(routes(t, map[string][]string{"big": {pod}}, nil))
	f := serveEngine(t, p, 8080)
	c := dialFront(t, f.addr, 30*time.Second)
	br := bufio.NewReaderSize(c, 1<<10)
	for i := range 2 {
		fmt.Fprint(c, "GET /big HTTP/1.1\r\nHost: app.example\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		chunk := make([]byte, 64<<10)
		for {
			n, err := resp.Body.Read(chunk)
			got.Write(chunk[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 && got.Len()%(1<<20) < n {
				time.Sleep(20 * time.Millisecond) // slowly, now and then
			}
		}
		if !bytes.Equal(got.Bytes(), body) {
			t.Fatalf("request %d: %d bytes, not the pod's %d", i+1, got.Len(), len(body))
		}
	}
	if n := f.handoffs.Load(); n != 0 {
		t.Fatalf("%d handoffs to net/http, want none", n)
	}
}

// TestLoopsTimeouts: a head that does not come in whole within the
// header timeout, and a kept-alive connection idle past the idle
// timeout, are closed; a connection is released once however it ends.
func TestLoopsTimeouts(t *testing.T) {
	p := New(Options{EventLoops: 3}) // connections spread over several
	t.Cleanup(p.Close)
	p.Set(routes(t, map[string][]string{"alpha": {echo(t, "a")}}, nil))
	var released atomic.Int32
	f, _ := serveEngineWith(t, p, 8080, 300*time.Millisecond, 600*time.Millisecond, func() { released.Add(1) })
	dial := func() net.Conn { return dialFront(t, f.addr, 0) }
	closedWithin := func(c net.Conn, d time.Duration) bool {
		_ = c.SetReadDeadline(time.Now().Add(d))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	}
	partial := dial()
	fmt.Fprint(partial, "GET /alpha HTTP/1.1\r\nHo")
	if closedWithin(partial, 100*time.Millisecond) {
		t.Fatal("a connection closed well before its header timeout")
	}
	if !closedWithin(partial, 5*time.Second) {
		t.Fatal("a head cut short: the connection stayed open past the header timeout")
	}

	idle := dial()
	fmt.Fprint(idle, "GET /alpha HTTP/1.1\r\nHost: app.example\r\n\r\n")
	br := bufio.NewReader(idle)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// Past the header timeout but within the idle one: still open.
	if closedWithin(idle, 400*time.Millisecond) {
		t.Fatal("a kept-alive connection closed before its idle timeout")
	}
	if !closedWithin(idle, 5*time.Second) {
		t.Fatal("an idle connection stayed open past the idle timeout")
	}

	// One the client closes, one handed to net/http (a body) and closed.
	bye := dial()
	fmt.Fprint(bye, "GET /alpha HTTP/1.1\r\nHost: app.example\r\nConnection: close\r\n\r\n")
	_, _ = io.Copy(io.Discard, bye)
	handed := dial()
	fmt.Fprint(handed, "POST /alpha HTTP/1.1\r\nHost: app.example\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
	_, _ = io.Copy(io.Discard, handed)
	for deadline := time.Now().Add(5 * time.Second); released.Load() < 4 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a second release would come now
	if n := released.Load(); n != 4 {
		t.Fatalf("%d releases for 4 connections closed", n)
	}
}

// TestLoopsShutdown: shutting down closes a connection waiting for a
// request at once, lets a request in flight get its whole answer (its
// connection then closes), and returns.
func TestLoopsShutdown(t *testing.T) {
	answering := make(chan struct{})
	slow := rawPod(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		close(answering)
		time.Sleep(300 * time.Millisecond)
		fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlate")
	})
	p := New(Options{})
	t.Cleanup(p.Close)
	p.Set(routes(t, map[string][]string{"slow": {slow}}, nil))
	f, loops := serveEngineWith(t, p, 8080, 10*time.Second, 75*time.Second, func() {})
	idle := dialFront(t, f.addr, 10*time.Second)
	busy := dialFront(t, f.addr, 10*time.Second)
	fmt.Fprint(busy, "GET /slow HTTP/1.1\r\nHost: app.example\r\n\r\n")
	<-answering
	done := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		loops.Shutdown(ctx)
		close(done)
	}()
	if _, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the idle connection at shutdown: %v, want it closed", err)
	}
	all, err := io.ReadAll(busy)
	if err != nil || !strings.HasPrefix(string(all), "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(string(all), "\r\n\r\nlate") {
		t.Fatalf("the request in flight: %q %v; want its whole answer, then the connection closed", all, err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return once its connections were done")
	}
}

// TestLoopsPipelinedFailures: requests pipelined to a route whose
// endpoint fails at once (not even a connect to wait for) are answered
// one after the other, each 502. (The loop serves each next request from
// its ready list, not from the end of the last one, so its stack does
// not grow with them; Go's growable stack hides that from this test.)
func TestLoopsPipelinedFailures(t *testing.T) {
	p := New(Options{})
	t.Cleanup(p.Close)
	p.Set(routes(t, map[string][]string{"bad": {"not-an-address"}}, nil))
	f := serveEngine(t, p, 8080)
	c := dialFront(t, f.addr, 30*time.Second)
	const n = 5000
	go func() {
		req := strings.Repeat("GET /bad HTTP/1.1\r\nHost: app.example\r\n\r\n", n)
		_, _ = io.WriteString(c, req)
	}()
	br := bufio.NewReader(c)
	for i := range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i+1, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("answer %d: %d, want 502", i+1, resp.StatusCode)
		}
	}
}

// TestEngineBadChunks: an answer whose chunks break off after its head
// went closes the client's connection (only closing tells it the body
// is cut), and the pod's.
func TestEngineBadChunks(t *testing.T) {
	pod := cannedPod(t, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n", false)
	p := New(Options{})
	t.Cleanup(p.Close)
	p.Set(routes(t, map[string][]string{"bad": {pod}}, nil))
	f := serveEngine(t, p, 8080)
	c := dialFront(t, f.addr, 10*time.Second)
	fmt.Fprint(c, "GET /bad HTTP/1.1\r\nHost: app.example\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || err == nil {
		t.Fatalf("status %d, body %q read with %v; want the head, then the connection cut", resp.StatusCode, body, err)
	}
	if n := f.handoffs.Load(); n != 0 {
		t.Fatalf("%d handoffs to net/http, want none", n)
	}
}
