package pods

import (
	"context"
	"os"
	"time"

	"github.com/svcnet/svcnet/internal/node/cgroups"
	"github.com/svcnet/svcnet/internal/node/podstate"
	"github.com/svcnet/svcnet/internal/node/runtime"
)

// Container is one container of a pod: its state machine (podstate),
// which its worker reads and drives, and what runs it.
type Container struct {
	*podstate.Container
	proc      *runtime.Process
	stopProbe context.CancelFunc
	logPath   string
	env       []string // of the current start, for exec
	// cgroup enforces the current start's limits.
	cgroup cgroups.Group
	// warnedLimits: the pod was told which limits are not enforced.
	warnedLimits bool
}

// exited records the end of the current process and lets it go.
func (c *Container) exited(code int, started time.Time) {
	c.Exited(code, started, time.Now())
	// Killed (SIGKILL) by the kernel's OOM killer in its memory cgroup,
	// as the kubelet reports it.
	if t := c.State.Terminated; t != nil && code == 137 && c.cgroup.OOMKilled() {
		t.Reason = "OOMKilled"
	}
	_ = c.cgroup.Remove()
	c.cgroup = cgroups.Group{}
	if c.stopProbe != nil {
		c.stopProbe()
	}
	c.proc = nil
}

// StorageUsage is the local storage each container uses, by name: its
// writable layer while it runs, and its log.
func (p *Pod) StorageUsage() map[string]int64 {
	usage := map[string]int64{}
	for _, c := range p.containers {
		var n int64
		if c.proc != nil {
			if used, ok := runtime.LayerUsage(c.proc.Pid()); ok {
				n += used
			}
		}
		if fi, err := os.Stat(c.logPath); err == nil {
			n += fi.Size()
		}
		usage[c.Spec.Name] = n
	}
	return usage
}
