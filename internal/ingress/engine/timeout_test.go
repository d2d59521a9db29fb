package engine

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestWithWriteTimeout: a write the client takes nothing of for the
// timeout closes the connection and is counted once; a deadline of the
// connection's user ends a write as a deadline does, and neither closes
// nor counts; a client that reads steadily gets everything.
func TestWithWriteTimeout(t *testing.T) {
	const d = 500 * time.Millisecond
	tests := []struct {
		name      string
		own       time.Duration // the user's write deadline from now; 0: none
		readEvery time.Duration // 0: the client reads nothing
		wantErr   error
		timedOut  int32
	}{
		{"stalled", 0, 0, os.ErrDeadlineExceeded, 1},
		{"the user's deadline first", d / 5, 0, os.ErrDeadlineExceeded, 0},
		{"steady", 0, d / 10, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			server, client := pair(t)
			var timedOut atomic.Int32
			c := WithWriteTimeout(server, d, func() { timedOut.Add(1) })
			if tt.own > 0 {
				_ = c.SetWriteDeadline(time.Now().Add(tt.own))
			}
			read := make(chan int64, 1)
			reader := func(every time.Duration) {
				var n int64
				buf := make([]byte, 16<<10)
				for {
					m, err := client.Read(buf)
					n += int64(m)
					if err != nil {
						read <- n
						return
					}
					time.Sleep(every)
				}
			}
			if tt.readEvery > 0 {
				go reader(tt.readEvery)
			}
			// More than the sockets' buffers take in; for the steady
			// reader, several timeouts' worth of its reads.
			data := make([]byte, 1<<20)
			start := time.Now()
			n, err := c.Write(data)
			took := time.Since(start)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("wrote %d bytes in %v: %v, want %v", n, took, err, tt.wantErr)
			}
			if got := timedOut.Load(); got != tt.timedOut {
				t.Fatalf("%d timeouts counted, want %d", got, tt.timedOut)
			}
			if err != nil && took > 10*d {
				t.Fatalf("the write returned after %v", took)
			}
			if tt.readEvery > 0 && took < 2*d {
				t.Fatalf("written in %v: too fast to show anything about a timeout of %v", took, d)
			}
			// With the client reading and the user's deadline gone, the
			// connection writes again, unless the timeout closed it.
			if tt.readEvery == 0 {
				go reader(0)
			}
			_ = c.SetWriteDeadline(time.Time{})
			_, err = c.Write([]byte("x"))
			if closed := errors.Is(err, net.ErrClosed); closed != (tt.timedOut > 0) {
				t.Fatalf("a write after: %v; want the connection closed only by a timeout", err)
			}
			server.Close()
			if got := <-read; err == nil && got != int64(n)+1 {
				t.Fatalf("the client read %d bytes, want %d", got, n+1)
			}
		})
	}
}

// pair is a TCP connection over loopback, both ends.
func pair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	// A small receive buffer and segment size: over loopback's 64 KiB
	// segments the kernel takes in megabytes before a write waits.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 8<<10)
			_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 1400)
		})
	}}
	client, err = d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}
