package node

import (
	"github.com/svcnet/svcnet/internal/node/server"
	"github.com/svcnet/svcnet/internal/node/stats"
)

// The agent as its node server sees it (server.Node): the pods it runs,
// read from their workers under the agent's lock.

// Pod finds a pod the node runs; it implements server.Node.
func (a *Agent) Pod(namespace, name string) (server.Pod, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, w := range a.workers {
		if p := w.newest(); p.Namespace == namespace && p.Name == name {
			return server.Pod{Pod: p, Dir: w.dir, Exec: w.exec.Load()}, true
		}
	}
	return server.Pod{}, false
}

// LogActive reports whether a running container writes the log file at
// path; it implements server.Node.
func (a *Agent) LogActive(path string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, w := range a.workers {
		if t := w.exec.Load(); t != nil && t.Running[path] {
			return true
		}
	}
	return false
}

// Stats is the summary of the last measure (nil before the first); it
// implements server.Node.
func (a *Agent) Stats() *stats.Summary {
	a.stats.mu.Lock()
	defer a.stats.mu.Unlock()
	return a.stats.summary
}
