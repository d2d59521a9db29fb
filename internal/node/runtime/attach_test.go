package runtime

import (
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
