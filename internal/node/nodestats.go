package node

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/svcnet/svcnet/internal/node/stats"
)

// statsInterval is how often the agent measures its containers: the
// window of the CPU rates it reports (metrics-server scrapes kubelets
// every 15 s by default).
const statsInterval = 10 * time.Second

// statsSampler keeps the last measure of every container, and the
// summary made from the last two.
type statsSampler struct {
	mu      sync.Mutex
	prev    map[string]measure // by pod UID/container/pid
	summary *stats.Summary
	start   time.Time
}

type measure struct {
	at    time.Time
	usage stats.Usage
}

// sampleStats measures the node's containers every statsInterval until
// ctx ends.
func (a *Agent) sampleStats(ctx context.Context) {
	a.stats.start = time.Now()
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
	type running struct {
		ref        stats.PodReference
		start      time.Time
		containers map[string]int // name → pid (its process group)
	}
	var pods []running
	a.mu.Lock()
	for _, w := range a.workers {
		info := w.exec.Load()
		if info == nil || len(info.pids) == 0 {
			continue
		}
		p := w.newest()
		r := running{ref: stats.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)}, start: now,
			containers: info.pids}
		if p.Status.StartTime != nil {
			r.start = p.Status.StartTime.Time
		}
		pods = append(pods, r)
	}
	a.mu.Unlock()

	s := &a.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	next := map[string]measure{}
	// rate makes the stats of one measured set of processes, and
	// remembers it for the next sample.
	rate := func(key string, u stats.Usage) (*stats.CPUStats, *stats.MemoryStats, bool) {
		next[key] = measure{at: now, usage: u}
		prev, ok := s.prev[key]
		mem := &stats.MemoryStats{Time: now, WorkingSetBytes: u.MemoryBytes, RSSBytes: u.MemoryBytes}
		if !ok {
			return nil, mem, false
		}
		window := now.Sub(prev.at)
		return &stats.CPUStats{Time: now, Window: window, UsageNanoCores: stats.NanoCores(prev.usage, u, window),
			UsageCoreNanoSeconds: u.CPUNanoSeconds}, mem, true
	}
	sum := &stats.Summary{Node: stats.NodeStats{NodeName: a.cfg.NodeName, StartTime: s.start}}
	var nodeCPU, nodeMem uint64
	nodeComplete := true
	for _, p := range pods {
		ps := stats.PodStats{PodRef: p.ref, StartTime: p.start, CPU: &stats.CPUStats{Time: now}, Memory: &stats.MemoryStats{Time: now}}
		complete := true
		for name, pid := range p.containers {
			cpu, mem, ok := rate(p.ref.UID+"/"+name+"/"+strconv.Itoa(pid), groups[pid])
			complete = complete && ok
			cs := stats.ContainerStats{Name: name, StartTime: p.start, CPU: cpu, Memory: mem}
			ps.Containers = append(ps.Containers, cs)
			if cpu != nil {
				ps.CPU.UsageNanoCores += cpu.UsageNanoCores
				ps.CPU.UsageCoreNanoSeconds += cpu.UsageCoreNanoSeconds
				ps.CPU.Window = cpu.Window
			}
			ps.Memory.WorkingSetBytes += mem.WorkingSetBytes
			ps.Memory.RSSBytes += mem.RSSBytes
		}
		if !complete {
			ps.CPU = nil // not measured twice yet
		}
		nodeComplete = nodeComplete && complete
		if ps.CPU != nil {
			nodeCPU += ps.CPU.UsageNanoCores
		}
		nodeMem += ps.Memory.WorkingSetBytes
		sum.Pods = append(sum.Pods, ps)
	}
	// The node's own process group: its agent (the daemons it runs, the
	// service proxy and the DNS cache, lead groups of their own and are
	// not counted).
	self := syscall.Getpgrp()
	cpu, mem, ok := rate("node/"+strconv.Itoa(self), groups[self])
	if ok && nodeComplete {
		sum.Node.CPU = &stats.CPUStats{Time: now, Window: cpu.Window, UsageNanoCores: nodeCPU + cpu.UsageNanoCores}
	}
	sum.Node.Memory = &stats.MemoryStats{Time: now, WorkingSetBytes: nodeMem + mem.WorkingSetBytes, RSSBytes: nodeMem + mem.RSSBytes}
	s.prev, s.summary = next, sum
}

// serveStats answers kubelet's /stats/summary with the last summary.
func (a *Agent) serveStats(w http.ResponseWriter, _ *http.Request) {
	a.stats.mu.Lock()
	sum := a.stats.summary
	a.stats.mu.Unlock()
	if sum == nil {
		http.Error(w, "no measure yet", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(sum)
}
