package runtime

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Spec is one container process to start.
type Spec struct {
	Exec ExecOptions
	Env  []string
	// Log is the file that receives the process's output in the CRI log
	// format that `kubectl logs` reads back.
	Log string
	// StateDir is this start's state, where its shim records the pid
	// and the exit code; the caller makes it (empty) first.
	StateDir string
	Stdio    Stdio
}

// Process is a running container process, watched through its shim.
type Process struct {
	pid, shim int
	Started   time.Time
	done      chan struct{}
	mu        sync.Mutex
	exit      int
}

// startWait bounds how long a shim may take to start its container.
const startWait = 10 * time.Second

// Start launches spec under a shim of its own (`self internal
// container-shim`), in a session of its own, so that the container
// outlives this process.
func Start(self string, spec Spec) (*Process, error) {
	if err := os.WriteFile(filepath.Join(spec.StateDir, envFile), []byte(strings.Join(spec.Env, "\x00")), 0o600); err != nil {
		return nil, err
	}
	shimLog, err := os.OpenFile(filepath.Join(spec.StateDir, "shim.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer shimLog.Close()
	cmd := exec.Command(self, ShimOptions{StateDir: spec.StateDir, Log: spec.Log, Stdio: spec.Stdio, Exec: spec.Exec}.Args()...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.Stdout, cmd.Stderr = shimLog, shimLog
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start container shim: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // reap it while it is ours
	deadline := time.After(startWait)
	for {
		if rec, err := readRecord(spec.StateDir); err == nil {
			return watch(spec.StateDir, rec), nil
		}
		select {
		case <-exited:
			// It ended before recording a start: it could not start.
			if rec, err := readRecord(spec.StateDir); err == nil {
				return watch(spec.StateDir, rec), nil
			}
			code, _ := readExit(spec.StateDir)
			log, _ := os.ReadFile(filepath.Join(spec.StateDir, "shim.log"))
			return nil, fmt.Errorf("container shim exited with %d before starting the container: %s", code, strings.TrimSpace(string(log)))
		case <-deadline:
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("container shim did not start the container in %s", startWait)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Adopt finds the container a shim started from stateDir, running or
// finished (a restarted agent picking up its containers). It fails when
// stateDir never had a started container.
func Adopt(stateDir string) (*Process, error) {
	rec, err := readRecord(stateDir)
	if err != nil {
		return nil, err
	}
	return watch(stateDir, rec), nil
}

// Kill ends whatever runs from stateDir: the container its shim
// recorded, and any shim of stateDir, recorded or not (one that an agent
// started just before it died, before the shim wrote its pid). For pods
// deleted while the agent was away, and before a start reuses stateDir.
// The container dies with its shim (its parent-death signal).
func Kill(stateDir string) {
	if rec, err := readRecord(stateDir); err == nil && isShimOf(rec.shim, stateDir) {
		_ = syscall.Kill(-rec.pid, syscall.SIGKILL)
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && isShimOf(pid, stateDir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// watch follows the shim of rec until it exits, then reads the exit code
// it recorded (137: the shim was killed, and its container with it).
func watch(dir string, rec shimRecord) *Process {
	p := &Process{pid: rec.pid, shim: rec.shim, Started: rec.started, done: make(chan struct{})}
	go func() {
		waitGone(rec.shim, dir)
		code, ok := readExit(dir)
		if !ok {
			code = 128 + int(syscall.SIGKILL)
		}
		p.mu.Lock()
		p.exit = code
		p.mu.Unlock()
		close(p.done)
	}()
	return p
}

// waitGone returns once the shim pid has exited. A pidfd makes that
// exact; a pid that is another program's by now (no exit recorded but a
// process that is no shim of dir) counts as gone.
func waitGone(pid int, dir string) {
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		defer unix.Close(fd)
		for isShimOf(pid, dir) {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, -1)
			if err == nil && n > 0 {
				return // readable: it exited
			}
			if err != nil && err != unix.EINTR {
				time.Sleep(50 * time.Millisecond) // and look again
			}
		}
		return
	}
	for isShimOf(pid, dir) {
		time.Sleep(50 * time.Millisecond)
	}
}

func isShimOf(pid int, dir string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(cmdline), "\x00container-shim\x00--state\x00"+dir+"\x00")
}

// copyLog writes lines as "<RFC3339Nano> <stream> F <line>".
func copyLog(w io.Writer, mu *sync.Mutex, stream string, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		mu.Lock()
		fmt.Fprintf(w, "%s %s F %s\n", time.Now().UTC().Format(time.RFC3339Nano), stream, sc.Bytes())
		mu.Unlock()
	}
}

func exitCode(cmd *exec.Cmd, err error) int {
	if cmd.ProcessState == nil {
		return 128
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// Pid is the container's process id.
func (p *Process) Pid() int { return p.pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitCode is the exit code once Done (128+signal when killed).
func (p *Process) ExitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// Stop sends SIGTERM to the container's process group and SIGKILL after
// grace, as kubelet does; it returns once the process is gone.
func (p *Process) Stop(grace time.Duration) {
	select {
	case <-p.done:
		return // its process group may be someone else's by now
	default:
	}
	pgid := -p.pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	_ = syscall.Kill(pgid, syscall.SIGKILL) // whatever is left of the group
	<-p.done
}

// RunOnce runs a command in a pod to completion (exec probes, `svcnet
// exec`), with a timeout, and returns its combined output and exit code.
func RunOnce(self string, o ExecOptions, env []string, timeout time.Duration) ([]byte, int, error) {
	cmd := exec.Command(self, o.Args()...)
	cmd.Env = env
	cmd.SysProcAttr = SysProcAttr(o)
	var out limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, -1, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.Bytes(), exitCode(cmd, err), nil
	case <-time.After(timeout):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return out.Bytes(), -1, fmt.Errorf("timed out after %s", timeout)
	}
}

// limitedBuffer keeps the first 64 KiB written.
type limitedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 64*1024 - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func (b *limitedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf...)
}
