package stats

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, line             string
		pgrp                   int
		ticks, childTicks, rss uint64
		wantErr                bool
	}{
		{"plain", "1234 (sleep) S 1 1234 1234 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 500 2654208 212 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0",
			1234, 10, 0, 212, false},
		{"a name with spaces and parentheses", "77 (a (b) c) R 1 70 70 0 -1 0 0 0 0 0 150 50 30 20 20 0 1 0 9 100 9 0",
			70, 200, 50, 9, false},
		{"negative fields", "5 (x) S 1 5 5 0 -1 0 0 0 0 0 1 1 -1 3 20 0 1 0 9 100 -4 0",
			5, 2, 3, 0, false},
		{"no name", "77 R 1", 0, 0, 0, 0, true},
		{"cut short", "77 (x) R 1 70", 0, 0, 0, 0, true},
		{"not a number", "77 (x) R 1 70 70 0 -1 0 0 0 0 0 x 50 30 20 20 0 1 0 9 100 9 0", 0, 0, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, ticks, childTicks, rss, err := ParseStat([]byte(tc.line))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && (g != tc.pgrp || ticks != tc.ticks || childTicks != tc.childTicks || rss != tc.rss) {
				t.Errorf("got group %d, %d+%d ticks, %d pages; want %d, %d+%d, %d", g, ticks, childTicks, rss,
					tc.pgrp, tc.ticks, tc.childTicks, tc.rss)
			}
		})
	}
}

// TestGroups sums the processes of a fake /proc by group and skips what
// is not a process.
func TestGroups(t *testing.T) {
	dir := t.TempDir()
	write := func(pid, stat string) {
		if err := os.MkdirAll(filepath.Join(dir, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, pid, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("10", "10 (sh) S 1 10 10 0 -1 0 0 0 0 0 100 0 0 0 20 0 1 0 9 100 4 0")
	write("11", "11 (curl) S 10 10 10 0 -1 0 0 0 0 0 50 50 100 0 20 0 1 0 9 100 6 0")
	write("20", "20 (other) S 1 20 20 0 -1 0 0 0 0 0 1 0 0 0 20 0 1 0 9 100 1 0")
	write("self", "not a process")
	g, err := Groups(dir)
	if err != nil {
		t.Fatal(err)
	}
	page := uint64(os.Getpagesize())
	if want := (Usage{CPUNanoSeconds: 2 * uint64(time.Second), ChildCPUNanoSeconds: uint64(time.Second), MemoryBytes: 10 * page}); g[10] != want {
		t.Errorf("group 10: %+v, want %+v", g[10], want)
	}
	if len(g) != 2 {
		t.Errorf("groups %v, want 10 and 20", g)
	}
}

func TestNanoCores(t *testing.T) {
	for _, tc := range []struct {
		prev, cur uint64
		d         time.Duration
		want      uint64
	}{
		{0, uint64(time.Second), 2 * time.Second, 5e8}, // half a core
		{uint64(time.Second), 0, time.Second, 0},       // restarted
		{0, uint64(time.Second), 0, 0},                 // no interval
		{0, 3 * uint64(time.Second), time.Second, 3e9}, // three cores
	} {
		if got := NanoCores(Usage{CPUNanoSeconds: tc.prev}, Usage{CPUNanoSeconds: tc.cur}, tc.d); got != tc.want {
			t.Errorf("NanoCores(%d→%d over %s) = %d, want %d", tc.prev, tc.cur, tc.d, got, tc.want)
		}
	}
}

// TestSampler follows one node through successive measures (each case
// is the next): no CPU rate at the first, rates over the window after
// it, a container that started within the window counted with all its
// time (unless its group was measured before), a sum that fell counted
// 0, the children waited for counted for containers and not for the
// agent, no rates without a window, and the node's rate always the sum
// of its pods' and the agent's, whatever pods come and go.
func TestSampler(t *testing.T) {
	const sec = uint64(time.Second)
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	web := Pod{Ref: PodReference{Name: "web", UID: "u1"}, Containers: map[string]int{"c": 100}}
	batch := Pod{Ref: PodReference{Name: "batch", UID: "u2"}, Containers: map[string]int{"c": 200}}
	webRestarted := Pod{Ref: web.Ref, Containers: map[string]int{"c": 101}}
	multi := Pod{Ref: PodReference{Name: "multi", UID: "u3"}, Containers: map[string]int{"a": 300, "b": 301}}
	late := Pod{Ref: PodReference{Name: "late", UID: "u4"}, Containers: map[string]int{"c": 400}}
	type pod struct {
		name string
		cpu  int64 // nanocores; -1: no rate
		mem  uint64
	}
	u := func(cpu, children, mem uint64) Usage {
		return Usage{CPUNanoSeconds: cpu, ChildCPUNanoSeconds: children, MemoryBytes: mem}
	}
	s := &Sampler{Node: "node-1", Start: t0}
	for _, tc := range []struct {
		name    string
		at      time.Duration
		groups  map[int]Usage // the agent's group is 1
		pods    []Pod
		nodeCPU int64 // nanocores; -1: no rate
		nodeMem uint64
		want    []pod
	}{
		{"first measure: memory only", 0,
			map[int]Usage{1: u(5*sec, 0, 10), 100: u(2*sec, 0, 30)},
			[]Pod{web}, -1, 40, []pod{{"web", -1, 30}}},
		{"web used 1 s of 10, the agent 2 s", 10 * time.Second,
			map[int]Usage{1: u(7*sec, 0, 10), 100: u(3*sec, 0, 30)},
			[]Pod{web}, 3e8, 40, []pod{{"web", 1e8, 30}}},
		{"batch started within the window: all its 5 s count", 20 * time.Second,
			map[int]Usage{1: u(7*sec, 0, 10), 100: u(3*sec, 0, 30), 200: u(5*sec, 0, 50)},
			[]Pod{web, batch}, 5e8, 90, []pod{{"web", 0, 30}, {"batch", 5e8, 50}}},
		{"web restarted (a new group), batch gone", 30 * time.Second,
			map[int]Usage{1: u(8*sec, 0, 10), 101: u(2*sec, 0, 20)},
			[]Pod{webRestarted}, 3e8, 30, []pod{{"web", 2e8, 20}}},
		{"no pods (group 300 runs, not listed yet)", 40 * time.Second,
			map[int]Usage{1: u(9*sec, 0, 10), 300: u(4*sec, 0, 5)},
			nil, 1e8, 10, nil},
		{"two containers: a rated from the last measure, b new", 50 * time.Second,
			map[int]Usage{1: u(10*sec, 0, 10), 300: u(6*sec, 0, 5), 301: u(1*sec, 0, 7)},
			[]Pod{multi}, 4e8, 22, []pod{{"multi", 3e8, 12}}},
		{"a's sum fell (a process exited unwaited for): 0 for a", 60 * time.Second,
			map[int]Usage{1: u(11*sec, 0, 10), 300: u(5*sec, 0, 5), 301: u(2*sec, 0, 7)},
			[]Pod{multi}, 2e8, 22, []pod{{"multi", 1e8, 12}}},
		{"the agent waited for a shim that ran 30 s: not the node's", 70 * time.Second,
			map[int]Usage{1: u(12*sec, 30*sec, 10), 300: u(6*sec, 0, 5), 301: u(2*sec, 0, 7)},
			[]Pod{multi}, 2e8, 22, []pod{{"multi", 1e8, 12}}},
		{"b's command exited, waited for: its time stays b's", 80 * time.Second,
			map[int]Usage{1: u(13*sec, 30*sec, 10), 300: u(6*sec, 0, 5), 301: u(1*sec, 4*sec, 7)},
			[]Pod{multi}, 4e8, 22, []pod{{"multi", 3e8, 12}}},
		{"no time between measures: no rates", 80 * time.Second,
			map[int]Usage{1: u(13*sec, 30*sec, 10), 300: u(6*sec, 0, 5), 301: u(1*sec, 4*sec, 7)},
			[]Pod{multi}, -1, 22, []pod{{"multi", -1, 12}}},
		{"group 400 runs with waited-for children, not listed yet", 90 * time.Second,
			map[int]Usage{1: u(14*sec, 30*sec, 10), 300: u(6*sec, 0, 5), 301: u(1*sec, 4*sec, 7), 400: u(2*sec, 3*sec, 9)},
			[]Pod{multi}, 1e8, 22, []pod{{"multi", 0, 12}}},
		{"late listed: rated from group 400's last measure, children and all", 100 * time.Second,
			map[int]Usage{1: u(15*sec, 30*sec, 10), 300: u(6*sec, 0, 5), 301: u(1*sec, 4*sec, 7), 400: u(3*sec, 4*sec, 9)},
			[]Pod{multi, late}, 3e8, 31, []pod{{"multi", 0, 12}, {"late", 2e8, 9}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum := s.Sample(t0.Add(tc.at), tc.groups, tc.pods, 1)
			rate := func(c *CPUStats) int64 {
				if c == nil {
					return -1
				}
				return int64(c.UsageNanoCores)
			}
			if sum.Node.NodeName != "node-1" || rate(sum.Node.CPU) != tc.nodeCPU || sum.Node.Memory.WorkingSetBytes != tc.nodeMem {
				t.Errorf("node %s: CPU %d, memory %d; want node-1: %d, %d",
					sum.Node.NodeName, rate(sum.Node.CPU), sum.Node.Memory.WorkingSetBytes, tc.nodeCPU, tc.nodeMem)
			}
			var got []pod
			for _, p := range sum.Pods {
				got = append(got, pod{p.PodRef.Name, rate(p.CPU), p.Memory.WorkingSetBytes})
				sum := int64(-1)
				for _, c := range p.Containers {
					if r := rate(c.CPU); r >= 0 {
						sum = max(sum, 0) + r
					}
				}
				if sum != rate(p.CPU) {
					t.Errorf("pod %s: containers %+v add up to %d, not its CPU %d", p.PodRef.Name, p.Containers, sum, rate(p.CPU))
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("pods %+v, want %+v", got, tc.want)
			}
		})
	}
}
