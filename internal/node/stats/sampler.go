package stats

import (
	"strconv"
	"time"
)

// Pod is a running pod as the sampler sees it: its containers by name,
// each the process group its first process leads.
type Pod struct {
	Ref        PodReference
	Start      time.Time
	Containers map[string]int // name → process group
}

// Sampler turns successive measures of a node's process groups into
// summaries. It keeps what each container had used at the last measure,
// so that the next one can give rates over the time between them.
type Sampler struct {
	Node  string
	Start time.Time

	at         time.Time        // of the last measure; zero before the first
	prev       map[string]Usage // by pod UID/container/process group
	prevGroups map[int]Usage    // every process group at the last measure
}

// Sample makes the summary of one measure: groups is every process
// group's usage now (Groups), pods the node's running pods, self the
// node agent's own group, counted in the node's figures.
//
// A container's CPU counts the children its processes waited for; the
// agent's does not: the agent waits for the shims, proxies and exec
// sessions it starts, each in a process group of its own and counted
// there while it runs, so its whole lifetime would come into the
// agent's window a second time as it exits. The price: the short
// commands the agent runs in its own group (ip, iptables) count while
// they run and leave its sum when they exit, which then falls (a window
// with no CPU for the agent, as below).
//
// The first measure has memory but no CPU rate. After it, a container
// that was not measured last time started since then (a new pod, or a
// restart: a new process group), so all the CPU time it has used falls
// within the window and its rate is that time over the window; unless
// its process group was there at the last measure already (a container
// the agent had not listed yet), which then gives the rate. kubelet
// reads the node's rate from the root cgroup, which new pods never make
// unknown; with this rule neither do they here, where a node without a
// rate would vanish from `kubectl top nodes` for a whole window each time
// a pod starts. A process that exited within the window unwaited for
// (see Groups) takes all its time out of its group's sum: a sum that
// fell gives the group no CPU that window (rate 0), where a cgroup would
// have kept the time.
func (s *Sampler) Sample(now time.Time, groups map[int]Usage, pods []Pod, self int) *Summary {
	window := now.Sub(s.at)
	rated := !s.at.IsZero() && window > 0
	next := make(map[string]Usage, len(s.prev))
	// rate makes the stats of one measured group and remembers its usage.
	rate := func(key string, pid int, children bool) (*CPUStats, *MemoryStats) {
		u := groups[pid]
		if children {
			u = u.WithChildren()
		} else {
			u.ChildCPUNanoSeconds = 0
		}
		next[key] = u
		mem := &MemoryStats{Time: now, WorkingSetBytes: u.MemoryBytes, RSSBytes: u.MemoryBytes}
		if !rated {
			return nil, mem
		}
		prev, seen := s.prev[key]
		if !seen {
			// Zero: started within the window. The group measured last
			// time is this container's unless its leader's PID was
			// reused within one window, which needs the PIDs to wrap.
			prev = s.prevGroups[pid]
			if children {
				prev = prev.WithChildren()
			}
		}
		return &CPUStats{Time: now, Window: window, UsageNanoCores: NanoCores(prev, u, window),
			UsageCoreNanoSeconds: u.CPUNanoSeconds}, mem
	}
	sum := &Summary{Node: NodeStats{NodeName: s.Node, StartTime: s.Start}}
	var nodeCPU, nodeMem uint64
	for _, p := range pods {
		ps := PodStats{PodRef: p.Ref, StartTime: p.Start, Memory: &MemoryStats{Time: now}}
		if rated {
			ps.CPU = &CPUStats{Time: now, Window: window}
		}
		for name, pid := range p.Containers {
			cpu, mem := rate(p.Ref.UID+"/"+name+"/"+strconv.Itoa(pid), pid, true)
			ps.Containers = append(ps.Containers, ContainerStats{Name: name, StartTime: p.Start, CPU: cpu, Memory: mem})
			if cpu != nil {
				ps.CPU.UsageNanoCores += cpu.UsageNanoCores
				ps.CPU.UsageCoreNanoSeconds += cpu.UsageCoreNanoSeconds
				nodeCPU += cpu.UsageNanoCores
			}
			ps.Memory.WorkingSetBytes += mem.WorkingSetBytes
			ps.Memory.RSSBytes += mem.RSSBytes
		}
		nodeMem += ps.Memory.WorkingSetBytes
		sum.Pods = append(sum.Pods, ps)
	}
	cpu, mem := rate("node/"+strconv.Itoa(self), self, false)
	if cpu != nil {
		sum.Node.CPU = &CPUStats{Time: now, Window: window, UsageNanoCores: nodeCPU + cpu.UsageNanoCores}
	}
	sum.Node.Memory = &MemoryStats{Time: now, WorkingSetBytes: nodeMem + mem.WorkingSetBytes, RSSBytes: nodeMem + mem.RSSBytes}
	s.at, s.prev, s.prevGroups = now, next, groups
	return sum
}
