package node

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/svcnet/svcnet/internal/restart"
)

// daemonStopWait is how long a node daemon gets between SIGTERM and
// SIGKILL when the agent stops.
const daemonStopWait = 10 * time.Second

// runDaemon keeps one of the node's own processes (the service proxy,
// the node-local DNS cache) running in the agent's network namespace,
// restarting it with back-off when it exits; its output goes to
// name.log in the node's state directory.
//
// A daemon outlives a crash of the agent, as kube-proxy and NodeLocal
// DNSCache outlive kubelet's: pods on the node would otherwise lose DNS
// until the agent is back. The next run of the agent finds it by its pid
// file and command line and adopts it. A graceful stop of the agent
// stops its daemons.
func (a *Agent) runDaemon(ctx context.Context, name string, argv []string) {
	backoff := restart.Components.New()
	logPath := filepath.Join(a.cfg.StateDir, name+".log")
	pidPath := filepath.Join(a.cfg.StateDir, name+".pid")
	if pid := adoptable(pidPath, argv); pid > 0 {
		slog.Info(name+" still running from the agent's last run; adopted", "pid", pid)
		waitGone(ctx, pid)
	}
	for ctx.Err() == nil {
		logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			slog.Error(name+" log", "err", err)
			return
		}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = logf, logf
		// Its own process group and no parent-death signal: it lives on
		// when the agent dies.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = daemonStopWait
		started := time.Now()
		if err = cmd.Start(); err == nil {
			_ = os.WriteFile(pidPath, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
			err = cmd.Wait()
		}
		logf.Close()
		if ctx.Err() != nil {
			return
		}
		wait := backoff.Exited(time.Since(started))
		slog.Warn(name+" exited; restarting", "err", err, "log", logPath, "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// adoptable returns the pid recorded in pidPath if that process is
// still running argv, else 0.
func adoptable(pidPath string, argv []string) int {
	b, err := os.ReadFile(pidPath)
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
	if !bytes.Equal(bytes.TrimSuffix(cmdline, []byte{0}), []byte(strings.Join(argv, "\x00"))) {
		return 0 // the pid was reused, or the command line changed
	}
	return pid
}

// waitGone waits until the adopted process pid exits. When ctx ends
// first, it stops the process as the agent stops its own children.
func waitGone(ctx context.Context, pid int) {
	alive := func() bool { return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) && !zombie(pid) }
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for alive() {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(pid, syscall.SIGTERM)
			deadline := time.Now().Add(daemonStopWait)
			for alive() && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			if alive() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			return
		case <-tick.C:
		}
	}
}

// zombie reports whether pid has exited and waits for its parent to reap
// it (it no longer runs, whatever kill(0) says).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses and
	// may itself contain them.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'Z'
	}
	return false
}
