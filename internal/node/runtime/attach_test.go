package runtime

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/syncbuf"
)

// slowListener hands out connections whose writes take a while (a
// writer goroutine not scheduled at once, as on a busy machine), and
// wait for gate to close if it is set, and can close them all at once,
// as the kernel does when the shim exits.
type slowListener struct {
	net.Listener
	gate  chan struct{}
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
	return slowConn{c, l.gate}, nil
}

func (l *slowListener) exit() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
}

type slowConn struct {
	net.Conn
	gate chan struct{}
}

func (c slowConn) Write(p []byte) (int, error) {
	time.Sleep(50 * time.Millisecond)
	if c.gate != nil {
		<-c.gate
	}
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

// startHub serves a hub on a fresh state directory through sl, whose
// writes wait for gate when it is not nil.
func startHub(t *testing.T, gate chan struct{}) (state string, hub *attachHub, sl *slowListener) {
	t.Helper()
	return startHubStdio(t, gate, Stdio{})
}

// startHubStdio is startHub for a container with stdio.
func startHubStdio(t *testing.T, gate chan struct{}, stdio Stdio) (state string, hub *attachHub, sl *slowListener) {
	t.Helper()
	state = t.TempDir()
	l, err := listenAttach(state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	sl = &slowListener{Listener: l, gate: gate}
	hub = newAttachHub(stdio, nil, nil)
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
	state, hub, _ := startHub(t, nil)
	_, _ = hub.output(frameStdout).Write([]byte("the only line\n"))
	hub.closeAll()
	var out syncbuf.Buffer
	if err := Attach(state, AttachStreams{Stdout: &out}); !errors.Is(err, ErrExited) {
		t.Fatalf("attach to an exited container: %v with output %q, want ErrExited", err, out.String())
	}
}

// TestAttachBurstBeforeExit: a burst of small writes, more than the
// client's connection takes at once, then the exit: the client gets all
// of it.
func TestAttachBurstBeforeExit(t *testing.T) {
	state, hub, sl := startHub(t, nil)
	var out syncbuf.Buffer
	done := make(chan error, 1)
	go func() { done <- Attach(state, AttachStreams{Stdout: &out}) }()
	waitClients(t, hub, 1)
	var want strings.Builder
	w := hub.output(frameStdout)
	for i := range 2000 {
		line := fmt.Sprintf("%d\n", i)
		want.WriteString(line)
		_, _ = w.Write([]byte(line))
	}
	hub.closeAll()
	sl.exit()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("attach did not end")
	}
	if got := out.String(); got != want.String() {
		t.Errorf("attached client got %d of the %d bytes written before the exit; ends %q", len(got), want.Len(), got[max(0, len(got)-20):])
	}
}

// TestAttachShimGone: a connection that ends before the container's
// exit (its shim killed) fails the attach, with the output so far.
func TestAttachShimGone(t *testing.T) {
	state, hub, sl := startHub(t, nil)
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

// TestAttachBehind: a client that falls more than attachBacklog behind
// the output is let go after what was queued for it, and its attach
// fails saying so; the container's output never waits for it.
func TestAttachBehind(t *testing.T) {
	defer func(b int) { attachBacklog = b }(attachBacklog)
	attachBacklog = 1000
	gate := make(chan struct{})
	state, hub, _ := startHub(t, gate)
	var out syncbuf.Buffer
	done := make(chan error, 1)
	go func() { done <- Attach(state, AttachStreams{Stdout: &out}) }()
	waitClients(t, hub, 1)
	w := hub.output(frameStdout)
	for range 100 {
		_, _ = w.Write([]byte("0123456789abcdef\n"))
	}
	waitClients(t, hub, 0)
	close(gate)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "behind") {
			t.Errorf("attach of a client let go: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("attach did not end")
	}
	// What was queued before it fell behind: whole writes, within the
	// backlog.
	if got, want := out.String(), strings.Repeat("0123456789abcdef\n", 1000/17); got != want {
		t.Errorf("the client let go got %q, want %q", got, want)
	}
}

// TestAttachEarlyOutput: the first client of a stdinOnce container
// (kubectl run -i's) gets what the container wrote before it came, as
// long as that was within firstAttach; later clients, and clients of
// other containers, get the output from when they came.
func TestAttachEarlyOutput(t *testing.T) {
	defer func(n int) { firstAttach = n }(firstAttach)
	firstAttach = 100
	for _, tc := range []struct {
		name               string
		stdio              Stdio
		early              string
		wantFirst, wantAll string
	}{
		{"stdinOnce", Stdio{Stdin: true, StdinOnce: true}, "early\n", "early\nlate\n", "late\n"},
		{"more than firstAttach", Stdio{Stdin: true, StdinOnce: true}, strings.Repeat("early\n", 20), "late\n", "late\n"},
		{"stdin for every attach", Stdio{Stdin: true}, "early\n", "late\n", "late\n"},
		{"no stdin", Stdio{}, "early\n", "late\n", "late\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, hub, _ := startHubStdio(t, nil, tc.stdio)
			w := hub.output(frameStdout)
			for line := range strings.Lines(tc.early) {
				_, _ = w.Write([]byte(line))
			}
			var first, second syncbuf.Buffer
			done := make(chan error, 2)
			go func() { done <- Attach(state, AttachStreams{Stdout: &first}) }()
			waitClients(t, hub, 1)
			go func() { done <- Attach(state, AttachStreams{Stdout: &second}) }()
			waitClients(t, hub, 2)
			_, _ = w.Write([]byte("late\n"))
			hub.closeAll()
			for range 2 {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			if got := first.String(); got != tc.wantFirst {
				t.Errorf("the first client got %q, want %q", got, tc.wantFirst)
			}
			if got := second.String(); got != tc.wantAll {
				t.Errorf("the second client got %q, want %q", got, tc.wantAll)
			}
		})
	}
}
