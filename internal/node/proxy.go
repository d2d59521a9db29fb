package node

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// runProxy keeps the node's service proxy running in the agent's network
// namespace, restarting it with back-off when it exits.
func (a *Agent) runProxy(ctx context.Context) {
	backoff := time.Second
	logPath := a.cfg.StateDir + "/proxy.log"
	for ctx.Err() == nil {
		logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			slog.Error("proxy log", "err", err)
			return
		}
		cmd := exec.CommandContext(ctx, a.cfg.Proxy[0], a.cfg.Proxy[1:]...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 10 * time.Second
		started := time.Now()
		err = cmd.Run()
		logf.Close()
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > time.Minute {
			backoff = time.Second
		}
		slog.Warn("service proxy exited; restarting", "err", err, "log", logPath, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Minute)
	}
}
