package runtime

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/syncbuf"
)

// slowListener hands out connections whose writes take a while (a
// writer goroutine not scheduled at once, as on a busy machine) and can
// close them all at once, as the kernel does when the shim exits.
type slowListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *slowListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.conns = append(l.conns, c)
	return slowConn{c}, nil
}

func (l *slowListener) exit() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
}

type slowConn struct{ net.Conn }

func (c slowConn) Write(p []byte) (int, error) {
	time.Sleep(50 * time.Millisecond)
	return c.Conn.Write(p)
}

// TestAttachOutputBeforeExit: what the container wrote before it exited
// reaches the attached client, although the shim exits (and its
// connections with it) as soon as closeAll returns.
func TestAttachOutputBeforeExit(t *testing.T) {
	state := t.TempDir()
	l, err := listenAttach(state)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sl := &slowListener{Listener: l}
	hub := newAttachHub(Stdio{}, nil, nil)
	go hub.serve(sl)
	var out syncbuf.Buffer
	done := make(chan error, 1)
	go func() { done <- Attach(state, AttachStreams{Stdout: &out}) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		hub.mu.Lock()
		n := len(hub.clients)
		hub.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client was not registered")
		}
	}
	// The container's last output, then its exit.
	w := hub.output(frameStdout)
	for _, line := range []string{"echo:a\n", "echo:b\n", "bye\n"} {
		_, _ = w.Write([]byte(line))
	}
	hub.closeAll()
	sl.exit()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("attach did not end")
	}
	if got := out.String(); got != "echo:a\necho:b\nbye\n" {
		t.Errorf("attached client got %q of the output the container wrote before it exited", got)
	}
}

// startHub serves a hub on a fresh state directory through sl.
func startHub(t *testing.T) (state string, hub *attachHub, sl *slowListener) {
	t.Helper()
	state = t.TempDir()
	l, err := listenAttach(state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	sl = &slowListener{Listener: l}
	hub = newAttachHub(Stdio{}, nil, nil)
	go hub.serve(sl)
	return state, hub, sl
}

// waitClients waits until the hub has n clients.
func waitClients(t *testing.T, hub *attachHub, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		hub.mu.Lock()
		got := len(hub.clients)
		hub.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d attached clients, want %d", got, n)
		}
	}
}

// TestAttachOldShim: a shim that predates frameAttached (a container
// started by an older agent) sends output and ends with the connection,
// which stays a clean end.
func TestAttachOldShim(t *testing.T) {
	state := t.TempDir()
	l, err := listenAttach(state)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		if kind, _, err := readFrame(conn); err != nil || kind != frameHello {
			return
		}
		_ = writeFrame(conn, frameStdout, []byte("bye\n"))
	}()
	var out syncbuf.Buffer
	if err := Attach(state, AttachStreams{Stdout: &out}); err != nil || out.String() != "bye\n" {
		t.Errorf("attach to an old shim: %v, output %q", err, out.String())
	}
}

// TestAttachAfterExit: a client that comes after the container exited
// (its shim not gone yet) is told so, rather than getting a clean end
// with none of the output: kubectl run -i then shows the logs.
func TestAttachAfterExit(t *testing.T) {
	state, hub, _ := startHub(t)
	_, _ = hub.output(frameStdout).Write([]byte("the only line\n"))
	hub.closeAll()
	var out syncbuf.Buffer
	if err := Attach(state, AttachStreams{Stdout: &out}); !errors.Is(err, ErrExited) {
		t.Fatalf("attach to an exited container: %v with output %q, want ErrExited", err, out.String())
	}
}

// TestAttachShimGone: a connection that ends before the container's
// exit (its shim killed) fails the attach, with the output so far.
func TestAttachShimGone(t *testing.T) {
	state, hub, sl := startHub(t)
	var out syncbuf.Buffer
	done := make(chan error, 1)
	go func() { done <- Attach(state, AttachStreams{Stdout: &out}) }()
	waitClients(t, hub, 1)
	_, _ = hub.output(frameStdout).Write([]byte("before\n"))
	for deadline := time.Now().Add(10 * time.Second); out.String() != "before\n"; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("output %q", out.String())
		}
	}
	sl.exit()
	select {
	case err := <-done:
		if err == nil {
			t.Error("an attach whose shim went away ended well")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("attach did not end")
	}
}
