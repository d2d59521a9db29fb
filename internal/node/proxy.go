package node

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/svcnet/svcnet/internal/restart"
)

// runProxy keeps the node's service proxy running in the agent's network
// namespace, restarting it with back-off when it exits.
func (a *Agent) runProxy(ctx context.Context) {
	backoff := restart.Components.New()
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
		wait := backoff.Exited(time.Since(started))
		slog.Warn("service proxy exited; restarting", "err", err, "log", logPath, "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
