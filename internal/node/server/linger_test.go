package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// lingerPair is a TCP connection on loopback: the server's end as a
// lingerConn, whose reads a goroutine keeps taking (as a SPDY server's
// frame loop does), slowly, as on a busy machine, and the peer's end.
func lingerPair(t *testing.T) (*lingerConn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	peer, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	conn, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	lc := newLingerConn(conn, bufio.NewReaderSize(conn, 16))
	go func() {
		buf := make([]byte, 16)
		for {
			if _, err := lc.Read(buf); err != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return lc, peer
}

// TestLingerClose: a session's close reaches a peer that is still
// sending as an end (EOF) after all that was written, never as a reset,
// and the connection closes once the peer has closed its side.
func TestLingerClose(t *testing.T) {
	lc, peer := lingerPair(t)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := peer.Write([]byte("frames the server has not read when it closes")); err != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	if _, err := lc.Write([]byte("the status")); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- lc.Close() }()
	got, err := io.ReadAll(peer)
	close(stop)
	if err != nil || string(got) != "the status" {
		t.Fatalf("the peer read %q, %v; want the status, then EOF", got, err)
	}
	select {
	case err := <-closed:
		t.Fatalf("closed (%v) before the peer closed its side", err)
	case <-time.After(50 * time.Millisecond):
	}
	peer.Close()
	select {
	case <-closed:
	case <-time.After(time.Second):
		t.Fatal("not closed once the peer closed")
	}
}

// TestLingerCloseTimeout: a peer that never closes holds the close for
// lingerTimeout at most.
func TestLingerCloseTimeout(t *testing.T) {
	defer func(d time.Duration) { lingerTimeout = d }(lingerTimeout)
	lingerTimeout = 100 * time.Millisecond
	lc, peer := lingerPair(t)
	start := time.Now()
	if err := lc.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("close took %v", d)
	}
	if _, err := io.ReadAll(peer); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Logf("peer read: %v", err)
	}
}
