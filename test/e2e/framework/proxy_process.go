package framework

import (
	"bytes"
	"os/exec"
	"sync"
	"syscall"
	"testing"
)

// StartProcessIn runs `svcnet args...` inside ns (through `ip netns exec`,
// which execs svcnet in place, so signals and the parent-death signal
// reach svcnet itself) until Stop or the end of the test.
func StartProcessIn(t testing.TB, ns *Netns, args ...string) *Process {
	t.Helper()
	return StartProcessInWatched(t, ns, nil, args...)
}

// StartProcessInWatched is StartProcessIn with onLine called for every
// line the process writes, as it arrives: benchmarks time events by
// the log lines that report them.
func StartProcessInWatched(t testing.TB, ns *Netns, onLine func(line string), args ...string) *Process {
	t.Helper()
	p := &Process{t: t, done: make(chan struct{})}
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", ns.Name, Binary(t)}, args...)...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var w interface{ Write([]byte) (int, error) } = &lockedWriter{w: &p.logs, mu: &p.mu}
	if onLine != nil {
		w = &lineWriter{next: w, onLine: onLine}
	}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(p.Stop)
	return p
}

// lineWriter passes writes on and hands out complete lines.
type lineWriter struct {
	mu     sync.Mutex
	next   interface{ Write([]byte) (int, error) }
	onLine func(string)
	buf    []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.onLine(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	return l.next.Write(p)
}
