package node

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/svcnet/svcnet/internal/node/stats"
)

// statsInterval is how often the agent measures its containers: the
// window of the CPU rates it reports (metrics-server scrapes kubelets
// every 15 s by default).
const statsInterval = 10 * time.Second

// statsSampler keeps the node's sampler and the summary of its last
// measure.
type statsSampler struct {
	mu      sync.Mutex
	sampler stats.Sampler
	summary *stats.Summary
}

// sampleStats measures the node's containers every statsInterval until
// ctx ends.
func (a *Agent) sampleStats(ctx context.Context) {
	a.stats.mu.Lock()
	a.stats.sampler = stats.Sampler{Node: a.cfg.NodeName, Start: time.Now()}
	a.stats.mu.Unlock()
	t := time.NewTicker(statsInterval)
	defer t.Stop()
	for {
		a.measure(time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// measure takes one sample of every running container and of the agent
// itself, and makes the summary of rates since the previous one.
func (a *Agent) measure(now time.Time) {
	groups, err := stats.Groups("/proc")
	if err != nil {
		return
	}
	var pods []stats.Pod
	a.mu.Lock()
	for _, w := range a.workers {
		info := w.exec.Load()
		if info == nil || len(info.Pids) == 0 {
			continue
		}
		p := w.newest()
		sp := stats.Pod{Ref: stats.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)}, Start: now,
			Containers: info.Pids}
		if p.Status.StartTime != nil {
			sp.Start = p.Status.StartTime.Time
		}
		pods = append(pods, sp)
	}
	a.mu.Unlock()
	// The node's own process group is its agent's (the daemons it runs,
	// the service proxy and the DNS cache, lead groups of their own and
	// are not counted).
	self := syscall.Getpgrp()
	a.stats.mu.Lock()
	defer a.stats.mu.Unlock()
	a.stats.summary = a.stats.sampler.Sample(now, groups, pods, self)
}
