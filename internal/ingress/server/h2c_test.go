package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHTTP2WithoutTLS: the plain-HTTP port serves HTTP/1 and HTTP/2 with
// prior knowledge, and a request shorter than HTTP/2's preface is
// answered at once, not after the header timeout.
func TestHTTP2WithoutTLS(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := New()
	srv.Serve(&Listener{Listener: l}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Proto+" "+r.Method)
	}), nil, true, nil)
	t.Cleanup(srv.Shutdown)
	addr := l.Addr().String()

	// raw writes the pieces (a pause between them) and reads one answer.
	raw := func(t *testing.T, pieces ...string) (string, string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for i, p := range pieces {
			if i > 0 {
				time.Sleep(100 * time.Millisecond)
			}
			if _, err := io.WriteString(c, p); err != nil {
				t.Fatal(err)
			}
		}
		// Well under the 10 s header timeout.
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err.Error(), ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.Status, string(body)
	}
	cases := []struct {
		name       string
		pieces     []string
		wantStatus string
		wantBody   string
	}{
		{"a request shorter than the preface", []string{"GET /\r\n\r\n"}, "400 Bad Request", ""},
		{"a request line in pieces", []string{"GE", "T / HTTP/1.1\r\nHost: x\r\n\r\n"}, "200 OK", "HTTP/1.1 GET"},
		{"POST, which begins like the preface", []string{"P", "OST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"}, "200 OK", "HTTP/1.1 POST"},
		{"HTTP/1.0 without headers", []string{"GET / HTTP/1.0\r\n\r\n"}, "200 OK", "HTTP/1.0 GET"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := raw(t, tc.pieces...)
			if status != tc.wantStatus || (tc.wantBody != "" && body != tc.wantBody) {
				t.Errorf("%q: %s %q, want %s %q", tc.pieces, status, body, tc.wantStatus, tc.wantBody)
			}
		})
	}

	t.Run("HTTP/2 with prior knowledge", func(t *testing.T) {
		h2c := new(http.Protocols)
		h2c.SetUnencryptedHTTP2(true)
		client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Protocols: h2c}}
		defer client.CloseIdleConnections()
		for range 2 { // a second request on the same connection
			resp, err := client.Get("http://" + addr + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "HTTP/2.0 GET" {
				t.Errorf("%s %q", resp.Status, body)
			}
		}
	})

	t.Run("shutdown stops both sides", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range srv.list {
			if err := s.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// Neither server reports the shared listener's end as a failure.
		time.Sleep(100 * time.Millisecond)
		select {
		case err := <-srv.errs:
			t.Errorf("a server failed at shutdown: %v", err)
		default:
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections", addr)
		} else if !strings.Contains(err.Error(), "refused") {
			t.Errorf("dial after shutdown: %v", err)
		}
	})
}
