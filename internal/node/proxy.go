package node

import (
	"context"
	"path/filepath"
	"time"

	"github.com/svcnet/svcnet/internal/supervise"
)

// daemonStopWait is how long a node daemon gets between SIGTERM and
// SIGKILL when the agent stops.
const daemonStopWait = 10 * time.Second

// runDaemon keeps one of the node's own processes (the service proxy,
// the node-local DNS cache) running in the agent's network namespace
// until ctx ends, restarting it with back-off when it exits; its output
// goes to name.log in the node's state directory.
//
// A daemon outlives a crash of the agent, as kube-proxy and NodeLocal
// DNSCache outlive kubelet's: pods on the node would otherwise lose DNS
// until the agent is back. The next run of the agent finds it by its pid
// file and command line and adopts it. A graceful stop of the agent
// stops its daemons.
func (a *Agent) runDaemon(ctx context.Context, name string, argv []string) {
	p := supervise.Start(supervise.Spec{
		Name:    name,
		Argv:    argv,
		Log:     filepath.Join(a.cfg.StateDir, name+".log"),
		Detach:  true,
		PidFile: filepath.Join(a.cfg.StateDir, name+".pid"),
		Grace:   daemonStopWait,
	})
	<-ctx.Done()
	p.Stop()
}
