// Package stats measures what a node's containers use — CPU and memory —
// from /proc, and carries it in the shape of kubelet's summary API
// (/stats/summary), which the API server's metrics.k8s.io reads as
// metrics-server reads kubelet's.
//
// A container is its process group (each container process leads one):
// its CPU is the user and system time of the group's processes and of
// the children they waited for, its memory their resident set. kubelet
// reads the same from the container's cgroup (working set: resident
// memory less inactive file pages); svcnet's containers have no cgroup
// of their own, so processes that leave their group are not counted, and
// neither is the time of a process that exited without its parent
// waiting for it (an orphan reaped by init).
package stats

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// ClockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's
// times (100 on every Linux architecture svcnet runs on).
const ClockTicks = 100

// Usage is what a set of processes used: CPU time so far, their own and
// their waited-for children's apart, and memory now.
type Usage struct {
	CPUNanoSeconds      uint64 // the processes' own
	ChildCPUNanoSeconds uint64 // of the children they waited for
	MemoryBytes         uint64
}

// Add sums two usages.
func (u Usage) Add(v Usage) Usage {
	return Usage{CPUNanoSeconds: u.CPUNanoSeconds + v.CPUNanoSeconds,
		ChildCPUNanoSeconds: u.ChildCPUNanoSeconds + v.ChildCPUNanoSeconds,
		MemoryBytes:         u.MemoryBytes + v.MemoryBytes}
}

// WithChildren is the usage with the children's CPU time counted as the
// group's own.
func (u Usage) WithChildren() Usage {
	return Usage{CPUNanoSeconds: u.CPUNanoSeconds + u.ChildCPUNanoSeconds, MemoryBytes: u.MemoryBytes}
}

// ParseStat reads a /proc/<pid>/stat line: the process group, the CPU
// time (user+system, in clock ticks) of the process and apart that of
// the children it waited for, and the resident set (in pages). The
// children's time keeps a container's sum from falling each time a
// short-lived process (a shell's command) exits, which would take all
// its time with it.
// The command name may hold spaces and parentheses: fields are counted
// after its last ')'.
func ParseStat(line []byte) (pgrp int, ticks, childTicks, rssPages uint64, err error) {
	end := bytes.LastIndexByte(line, ')')
	if end < 0 {
		return 0, 0, 0, 0, fmt.Errorf("stat line without a command name: %q", line)
	}
	// After ") ": state(3) ppid(4) pgrp(5) … utime(14) stime(15)
	// cutime(16) cstime(17) … rss(24).
	f := bytes.Fields(line[end+1:])
	if len(f) < 22 {
		return 0, 0, 0, 0, fmt.Errorf("stat line with %d fields after the name", len(f))
	}
	field := func(n int) (uint64, error) { return strconv.ParseUint(string(f[n-3]), 10, 64) }
	g, err1 := strconv.Atoi(string(f[5-3]))
	ut, err2 := field(14)
	st, err3 := field(15)
	// cutime and cstime are signed in proc(5), never negative in practice.
	cut, err4 := strconv.ParseInt(string(f[16-3]), 10, 64)
	cst, err5 := strconv.ParseInt(string(f[17-3]), 10, 64)
	rss, err6 := strconv.ParseInt(string(f[24-3]), 10, 64)
	for _, e := range []error{err1, err2, err3, err4, err5, err6} {
		if e != nil {
			return 0, 0, 0, 0, fmt.Errorf("stat line: %w", e)
		}
	}
	return g, ut + st, uint64(max(cut, 0) + max(cst, 0)), uint64(max(rss, 0)), nil
}

// Groups sums the usage of every process under procDir (/proc) by
// process group.
func Groups(procDir string) (map[int]Usage, error) {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return nil, err
	}
	page := uint64(os.Getpagesize())
	out := map[int]Usage{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(procDir, e.Name(), "stat"))
		if err != nil {
			continue // it exited meanwhile
		}
		g, ticks, childTicks, rss, err := ParseStat(data)
		if err != nil {
			continue
		}
		tick := uint64(time.Second) / ClockTicks
		out[g] = out[g].Add(Usage{CPUNanoSeconds: ticks * tick, ChildCPUNanoSeconds: childTicks * tick, MemoryBytes: rss * page})
	}
	return out, nil
}

// NanoCores is the CPU rate between two measures of the same processes
// taken d apart (0 when the time went backwards: the group restarted).
func NanoCores(prev, cur Usage, d time.Duration) uint64 {
	if d <= 0 || cur.CPUNanoSeconds < prev.CPUNanoSeconds {
		return 0
	}
	return uint64(float64(cur.CPUNanoSeconds-prev.CPUNanoSeconds) * float64(time.Second) / float64(d))
}

// The summary, as much of kubelet's stats/v1alpha1 Summary as
// metrics.k8s.io needs, with its JSON names.
type (
	Summary struct {
		Node NodeStats  `json:"node"`
		Pods []PodStats `json:"pods"`
	}
	NodeStats struct {
		NodeName  string       `json:"nodeName"`
		StartTime time.Time    `json:"startTime"`
		CPU       *CPUStats    `json:"cpu,omitempty"`
		Memory    *MemoryStats `json:"memory,omitempty"`
	}
	PodStats struct {
		PodRef     PodReference     `json:"podRef"`
		StartTime  time.Time        `json:"startTime"`
		Containers []ContainerStats `json:"containers"`
		CPU        *CPUStats        `json:"cpu,omitempty"`
		Memory     *MemoryStats     `json:"memory,omitempty"`
	}
	PodReference struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		UID       string `json:"uid"`
	}
	ContainerStats struct {
		Name      string       `json:"name"`
		StartTime time.Time    `json:"startTime"`
		CPU       *CPUStats    `json:"cpu,omitempty"`
		Memory    *MemoryStats `json:"memory,omitempty"`
	}
	// CPUStats: the rate over Window ending at Time, and the total.
	CPUStats struct {
		Time                 time.Time     `json:"time"`
		Window               time.Duration `json:"window"` // svcnet's: kubelet has no window here
		UsageNanoCores       uint64        `json:"usageNanoCores"`
		UsageCoreNanoSeconds uint64        `json:"usageCoreNanoSeconds"`
	}
	MemoryStats struct {
		Time            time.Time `json:"time"`
		WorkingSetBytes uint64    `json:"workingSetBytes"`
		RSSBytes        uint64    `json:"rssBytes"`
	}
)
