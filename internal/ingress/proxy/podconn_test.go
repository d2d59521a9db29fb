package proxy

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingPod is a pod that counts its connections; with closeAfter it
// closes each one after answering, as a pod whose idle timeout fires
// just as the proxy reuses the connection.
func countingPod(t *testing.T, closeAfter bool) (string, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			switch r.URL.Path {
			case "/chunked":
				w.Write([]byte("part1,"))
				w.(http.Flusher).Flush()
				w.Write([]byte("part2"))
			default:
				w.Write([]byte("ok " + r.Method + " " + string(body)))
			}
		}),
		ConnState: func(c net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				conns.Add(1)
			case http.StateIdle:
				if closeAfter {
					// Close without telling: the proxy finds out when it
					// reuses the connection.
					time.AfterFunc(20*time.Millisecond, func() { c.Close() })
				}
			}
		},
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String(), &conns
}

func TestPodConnections(t *testing.T) {
	t.Run("kept alive and reused", func(t *testing.T) {
		addr, conns := countingPod(t, false)
		_, url := setup(t, Options{}, map[string][]string{"alpha": {addr}})
		for i := 0; i < 20; i++ {
			if resp, _ := do(t, "GET", url+"/alpha", "app.example", nil); resp.StatusCode != 200 {
				t.Fatalf("request %d: %d", i, resp.StatusCode)
			}
		}
		resp, _ := do(t, "GET", url+"/alpha/chunked", "app.example", nil)
		if resp.StatusCode != 200 {
			t.Fatalf("chunked: %d", resp.StatusCode)
		}
		if resp, _ := do(t, "HEAD", url+"/alpha", "app.example", nil); resp.StatusCode != 200 {
			t.Fatalf("HEAD: %d", resp.StatusCode)
		}
		if n := conns.Load(); n != 1 {
			t.Errorf("%d connections to the pod for sequential requests, want 1", n)
		}
	})
	t.Run("a connection the pod closed is replaced for requests without a body", func(t *testing.T) {
		addr, conns := countingPod(t, true)
		_, url := setup(t, Options{}, map[string][]string{"alpha": {addr}})
		for i := 0; i < 5; i++ {
			if resp, _ := do(t, "GET", url+"/alpha", "app.example", nil); resp.StatusCode != 200 {
				t.Fatalf("request %d: %d", i, resp.StatusCode)
			}
			time.Sleep(50 * time.Millisecond) // the pod closes in between
		}
		if n := conns.Load(); n != 5 {
			t.Errorf("%d connections, want 5 (one per request)", n)
		}
	})
	t.Run("a body read half-way does not return its connection", func(t *testing.T) {
		chunk := []byte(strings.Repeat("x", 1<<10))
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var conns atomic.Int32
		// An endless body for the first request (more than any socket
		// buffer holds), a short one after.
		var served atomic.Int32
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if served.Add(1) > 1 {
				w.Write(chunk)
				return
			}
			for i := 0; i < 256<<10; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}),
			ConnState: func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
		_, url := setup(t, Options{}, map[string][]string{"alpha": {l.Addr().String()}})
		req, _ := http.NewRequest("GET", url+"/alpha", nil)
		req.Host = "app.example"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1000)
		io.ReadFull(resp.Body, buf)
		resp.Body.Close() // the client gives up: the proxy's copy fails
		time.Sleep(100 * time.Millisecond)
		if resp, _ := do(t, "GET", url+"/alpha", "app.example", nil); resp.StatusCode != 200 {
			t.Fatalf("after an abandoned body: %d", resp.StatusCode)
		}
		if n := conns.Load(); n != 2 {
			t.Errorf("%d connections, want 2: a half-read connection must not be reused", n)
		}
	})
}
