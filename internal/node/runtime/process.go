package runtime

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Spec is one container process to start.
type Spec struct {
	Exec ExecOptions
	Env  []string
	// Log receives the process's output in the CRI log format that
	// `kubectl logs` reads back.
	Log io.Writer
}

// Process is a running container process.
type Process struct {
	cmd     *exec.Cmd
	Started time.Time
	done    chan struct{}
	mu      sync.Mutex
	exit    int
	wg      sync.WaitGroup
}

// Start launches spec through `self internal pod-exec`.
func Start(self string, spec Spec) (*Process, error) {
	cmd := exec.Command(self, spec.Exec.Args()...)
	cmd.Env = spec.Env
	cmd.SysProcAttr = SysProcAttr()
	p := &Process{cmd: cmd, done: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start container: %w", err)
	}
	p.Started = time.Now()
	var logMu sync.Mutex
	for stream, r := range map[string]io.Reader{"stdout": stdout, "stderr": stderr} {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			copyLog(spec.Log, &logMu, stream, r)
		}()
	}
	go func() {
		p.wg.Wait() // output first, so Wait's caller sees it all
		err := cmd.Wait()
		p.mu.Lock()
		p.exit = exitCode(cmd, err)
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
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

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

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
	pgid := -p.cmd.Process.Pid
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
	cmd.SysProcAttr = SysProcAttr()
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
