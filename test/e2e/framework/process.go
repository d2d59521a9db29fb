package framework

import (
	"bytes"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a running svcnet subcommand other than the API server.
type Process struct {
	t    testing.TB
	cmd  *exec.Cmd
	logs bytes.Buffer
	mu   sync.Mutex
	done chan struct{}
}

// StartProcess runs `svcnet args...` until Stop or the end of the test.
func StartProcess(t testing.TB, args ...string) *Process {
	return StartProcessOnCPUs(t, "", args...)
}

// StartProcessOnCPUs is StartProcess with the process bound to cpus
// (taskset's list syntax, "" for any): benchmarks give a server and its
// load generator cores of their own. Go sizes GOMAXPROCS from the
// affinity it starts with.
func StartProcessOnCPUs(t testing.TB, cpus string, args ...string) *Process {
	t.Helper()
	return StartCommandOnCPUs(t, cpus, Binary(t), args...)
}

// StartCommandOnCPUs is StartProcessOnCPUs for another program (bin):
// benchmarks run the tools svcnet is compared with the same way.
func StartCommandOnCPUs(t testing.TB, cpus, bin string, args ...string) *Process {
	t.Helper()
	return startCommand(t, CommandOnCPUs(cpus, bin, args...), nil)
}

// startCommand starts cmd, killed should the test binary die first, and
// stops it when the test ends. Its output is kept, and each complete line
// of it handed to onLine, unless nil, as it arrives.
func startCommand(t testing.TB, cmd *exec.Cmd, onLine func(line string)) *Process {
	t.Helper()
	p := &Process{t: t, done: make(chan struct{}), cmd: cmd}
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

// CommandOnCPUs is exec.Command bound to cpus (taskset's list syntax, ""
// for any).
func CommandOnCPUs(cpus, bin string, args ...string) *exec.Cmd {
	if cpus == "" {
		return exec.Command(bin, args...)
	}
	return exec.Command("taskset", append([]string{"-c", cpus, bin}, args...)...)
}

// Stop ends the process (SIGTERM, then SIGKILL after 10 s).
func (p *Process) Stop() { p.signal(syscall.SIGTERM) }

// Kill ends the process at once, as a crash would.
func (p *Process) Kill() { p.signal(syscall.SIGKILL) }

func (p *Process) signal(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	if p.t.Failed() {
		p.t.Logf("logs of %v:\n%s", p.cmd.Args, p.Logs())
	}
}

// PID is the process's id (of svcnet itself: ip netns exec execs it).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Logs returns what the process wrote.
func (p *Process) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}
