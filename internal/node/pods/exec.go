package pods

import "github.com/svcnet/svcnet/internal/node/runtime"

// ExecInfo describes a started pod to the node server's exec, attach,
// logs, port-forward and stats, which read it from other goroutines: it
// is replaced whole, never changed.
type ExecInfo struct {
	Netns, Hostname string
	Env             map[string][]string // by container
	Security        map[string]*runtime.Security
	Running         map[string]bool   // log files being written
	Pids            map[string]int    // running containers' processes, whose mounts exec enters
	Waiting         map[string]string // why containers that never ran wait ("ErrImagePull: …")
}

// Publish refreshes the pod's ExecInfo after a container started or
// stopped.
func (p *Pod) Publish() {
	info := &ExecInfo{Netns: p.netns, Hostname: Hostname(p.pod), Env: map[string][]string{},
		Security: map[string]*runtime.Security{}, Running: map[string]bool{}, Pids: map[string]int{}, Waiting: map[string]string{}}
	for _, c := range p.containers {
		if c.env != nil {
			info.Env[c.Spec.Name] = c.env
		}
		if sec, err := p.security(c); err == nil {
			info.Security[c.Spec.Name] = sec
		}
		if wt := c.State.Waiting; wt != nil && wt.Reason != "" {
			info.Waiting[c.Spec.Name] = wt.Reason + ": " + wt.Message
		}
		if c.Running() {
			info.Running[c.logPath] = true
			if c.proc != nil {
				info.Pids[c.Spec.Name] = c.proc.Pid()
			}
		}
	}
	p.publish(info)
}
