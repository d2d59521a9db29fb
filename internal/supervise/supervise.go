// Package supervise keeps one of svcnet's own processes running: it
// starts it, starts it again after a back-off when it exits (restart's
// policy), and stops it with SIGTERM, then SIGKILL to its process group
// after a grace period. svcnet up's supervisor keeps the cluster's
// components with it, the node agent its service proxy and DNS cache.
package supervise

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/svcnet/svcnet/internal/restart"
)

// Spec is a process to keep running.
type Spec struct {
	// Name names it in logs.
	Name string
	Argv []string
	// Log receives its standard output and error, appended.
	Log string
	// Files are inherited as descriptors 3, 4, …
	Files []*os.File
	// Detach lets the process outlive whoever supervises it (the node
	// agent's daemons, which the agent's next run adopts): no
	// parent-death signal. Either way it runs in a process group of its
	// own, which a stop that times out kills whole.
	Detach bool
	// PidFile, if set, records each run's pid; with Detach, a process it
	// names that still runs Argv is adopted at Start: watched until it
	// exits (and stopped by Stop), then started again as usual.
	PidFile string
	// OnStart is called with each run's pid (svcnet up records them for
	// svcnet down after a crash).
	OnStart func(pid int)
	// Policy is the restart back-off; restart.Components when zero.
	Policy restart.Policy
	// Grace is how long a stop waits after SIGTERM before SIGKILL.
	// Default 10 s.
	Grace time.Duration
}

// Process is a supervised process.
type Process struct {
	spec Spec

	stop chan struct{} // closed by Stop
	done chan struct{} // closed when the supervising loop has returned

	mu      sync.Mutex
	stopped bool          // stop is closed
	pid     int           // the current run's, 0 between runs
	exited  chan struct{} // closed when the current run has ended
}

// Start supervises spec until Stop.
func Start(spec Spec) *Process {
	if spec.Policy == (restart.Policy{}) {
		spec.Policy = restart.Components
	}
	if spec.Grace <= 0 {
		spec.Grace = 10 * time.Second
	}
	p := &Process{spec: spec, stop: make(chan struct{}), done: make(chan struct{})}
	go p.loop()
	return p
}

// loop runs the process again and again until Stop.
func (p *Process) loop() {
	defer close(p.done)
	if pid := p.adoptable(); pid > 0 {
		slog.Info(p.spec.Name+" still running from the last run; adopted", "pid", pid)
		p.watch(pid)
	}
	backoff := p.spec.Policy.New()
	for {
		started := time.Now()
		err := p.runOnce()
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if stopped || errors.Is(err, errStopped) {
			return
		}
		wait := backoff.Exited(time.Since(started))
		slog.Warn(p.spec.Name+" exited; restarting", "component", p.spec.Name, "err", err, "log", p.spec.Log, "in", wait)
		select {
		case <-p.stop:
			return
		case <-time.After(wait):
		}
	}
}

var errStopped = errors.New("stopped")

// runOnce starts the process and waits for it to end. It starts under
// the lock that Stop takes, so that a stop either sees this run or keeps
// it from starting, never neither (a leaked child).
func (p *Process) runOnce() error {
	logf, err := os.OpenFile(p.spec.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(p.spec.Argv[0], p.spec.Argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = p.spec.Files
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !p.spec.Detach {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return errStopped
	}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return err
	}
	exited := make(chan struct{})
	p.pid, p.exited = cmd.Process.Pid, exited
	p.mu.Unlock()
	if p.spec.PidFile != "" {
		_ = os.WriteFile(p.spec.PidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	}
	if p.spec.OnStart != nil {
		p.spec.OnStart(cmd.Process.Pid)
	}
	err = cmd.Wait()
	p.mu.Lock()
	p.pid = 0
	p.mu.Unlock()
	close(exited)
	return err
}

// Stop stops supervising: no restart from now on, and the running
// process (an adopted one too) gets SIGTERM, then SIGKILL to its group
// after the grace period. It returns once the process has exited.
func (p *Process) Stop() {
	p.mu.Lock()
	if !p.stopped {
		p.stopped = true
		close(p.stop)
	}
	pid, exited := p.pid, p.exited
	p.mu.Unlock()
	if pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(p.spec.Grace):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-exited
		}
	}
	<-p.done
}

// adoptable returns the pid recorded in the pid file if that process is
// still running Argv, else 0. Only a detached process can still be
// there: the others die with their supervisor.
func (p *Process) adoptable() int {
	if !p.spec.Detach || p.spec.PidFile == "" {
		return 0
	}
	b, err := os.ReadFile(p.spec.PidFile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return 0
	}
	if !bytes.Equal(bytes.TrimSuffix(cmdline, []byte{0}), []byte(strings.Join(p.spec.Argv, "\x00"))) {
		return 0 // the pid was reused, or the command line changed
	}
	return pid
}

// watch waits until the adopted process pid exits, as runOnce waits for
// its own: Stop signals it the same way. It is not our child, so it is
// polled.
func (p *Process) watch(pid int) {
	exited := make(chan struct{})
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		stopAdopted(pid, p.spec.Grace)
		return
	}
	p.pid, p.exited = pid, exited
	p.mu.Unlock()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for alive(pid) {
		<-tick.C
	}
	p.mu.Lock()
	p.pid = 0
	p.mu.Unlock()
	close(exited)
}

// stopAdopted stops a process that is not our child.
func stopAdopted(pid int, grace time.Duration) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for deadline := time.Now().Add(grace); alive(pid) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if alive(pid) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// alive reports whether pid still runs: it exists and is not a zombie
// waiting for its parent to reap it.
func alive(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and
	// may itself contain them.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}
