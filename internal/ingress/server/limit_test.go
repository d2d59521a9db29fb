package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestConnectionLimit(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ll := &Listener{Listener: l, Limit: NewLimit(2)}
	srv := &http.Server{Handler: limited(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})), ConnContext: ll.connContext}
	go srv.Serve(ll)
	t.Cleanup(func() { srv.Close() })

	conns := map[int]net.Conn{}
	status := func(i int) string {
		t.Helper()
		c := conns[i]
		if c == nil {
			if c, err = net.Dial("tcp", l.Addr().String()); err != nil {
				t.Fatal(err)
			}
			conns[i] = c
			t.Cleanup(func() { c.Close() })
		}
		fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		return resp.Status
	}
	steps := []struct {
		conn int
		want string
	}{
		{1, "200 OK"}, {2, "200 OK"}, {1, "200 OK"},
		{3, "503 Service Unavailable"}, // the third at once
		{2, "200 OK"},
	}
	for _, s := range steps {
		if got := status(s.conn); got != s.want {
			t.Fatalf("connection %d: %s, want %s", s.conn, got, s.want)
		}
	}
	// Closing one makes room.
	conns[1].Close()
	delete(conns, 1)
	deadline := time.Now().Add(5 * time.Second)
	for ll.Limit.open.Load() > 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := status(4); got != "200 OK" {
		t.Fatalf("after a close: %s", got)
	}
}
