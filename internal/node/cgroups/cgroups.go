// Package cgroups enforces containers' resource limits with the kernel's
// control groups, in cgroups svcnet makes under the node agent's own (so
// that nothing else of the machine's changes): a memory limit with the
// memory controller, a CPU limit as a CFS quota with the cpu controller,
// in the cgroup v1 hierarchies where the machine mounts those
// controllers. A container's process joins its groups before its
// command starts (runtime.ExecOptions.Cgroups); a container killed by
// the kernel's OOM killer inside its group is OOMKilled.
//
// A machine whose controllers are only in a cgroup2 hierarchy is not
// supported yet: the limits are reported as not enforced (an event on
// the pod), never silently dropped.
package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Controllers this package sets limits with.
const (
	Memory = "memory"
	CPU    = "cpu"
)

// cfsPeriod is the CFS period a CPU quota is set against (the kernel's
// default, the kubelet's too).
const cfsPeriod = 100000 // µs

// Hierarchy is where svcnet makes its cgroups: per controller, the
// directory of the agent's own cgroup in that controller's v1
// hierarchy; a controller the machine does not mount (v1) is missing.
type Hierarchy struct {
	dirs map[string]string
}

// Detect finds the agent's cgroups from /proc/self/cgroup and the
// machine's mounts.
func Detect() Hierarchy {
	return detect("/proc/self/cgroup", "/proc/self/mountinfo")
}

func detect(cgroupFile, mountinfo string) Hierarchy {
	h := Hierarchy{dirs: map[string]string{}}
	own := map[string]string{} // controller → path of the agent's cgroup
	if data, err := os.ReadFile(cgroupFile); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			// id:controllers:path
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 || parts[1] == "" {
				continue
			}
			for c := range strings.SplitSeq(parts[1], ",") {
				own[c] = parts[2]
			}
		}
	}
	f, err := os.Open(mountinfo)
	if err != nil {
		return h
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, after := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(after) < 3 || after[0] != "cgroup" {
			continue
		}
		root, point := fields[3], fields[4]
		for opt := range strings.SplitSeq(after[2], ",") {
			if (opt == Memory || opt == CPU) && h.dirs[opt] == "" {
				if path, ok := own[opt]; ok {
					// The mount shows the hierarchy from root down.
					rel, err := filepath.Rel(root, path)
					if err != nil || strings.HasPrefix(rel, "..") {
						continue
					}
					h.dirs[opt] = filepath.Join(point, rel)
				}
			}
		}
	}
	return h
}

// Has reports whether the machine offers controller c.
func (h Hierarchy) Has(c string) bool { return h.dirs[c] != "" }

// Limits are what a container may use; zero is no limit.
type Limits struct {
	MemoryBytes int64
	CPUMilli    int64 // thousandths of a CPU
}

// Group is one container's cgroups, by controller.
type Group struct {
	Dirs map[string]string
}

// Create makes the cgroups named name (svcnet-…) that enforce l, anew
// (a group of an earlier start, empty by then, is replaced, so that its
// OOM count starts at 0). unenforced lists the limits the machine cannot
// enforce.
func (h Hierarchy) Create(name string, l Limits) (g Group, unenforced []string, err error) {
	if !strings.HasPrefix(name, "svcnet-") || strings.ContainsAny(name, "/.") {
		return g, nil, fmt.Errorf("cgroup name %q: svcnet's cgroups are named svcnet-…, one path element", name)
	}
	g.Dirs = map[string]string{}
	want := []struct {
		controller string
		on         bool
		files      map[string]string
	}{
		{Memory, l.MemoryBytes > 0, map[string]string{"memory.limit_in_bytes": strconv.FormatInt(l.MemoryBytes, 10),
			"memory.memsw.limit_in_bytes": strconv.FormatInt(l.MemoryBytes, 10)}},
		{CPU, l.CPUMilli > 0, map[string]string{"cpu.cfs_period_us": strconv.Itoa(cfsPeriod),
			"cpu.cfs_quota_us": strconv.FormatInt(max(l.CPUMilli*cfsPeriod/1000, 1000), 10)}},
	}
	for _, w := range want {
		if !w.on {
			continue
		}
		base := h.dirs[w.controller]
		if base == "" {
			unenforced = append(unenforced, w.controller)
			continue
		}
		dir := filepath.Join(base, name)
		_ = os.Remove(dir) // an earlier start's, empty
		if err := os.Mkdir(dir, 0o755); err != nil {
			if errors.Is(err, unix.EROFS) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
				// Mounted, but not svcnet's to change (a container's view).
				unenforced = append(unenforced, w.controller)
				continue
			}
			g.Remove()
			return Group{}, nil, fmt.Errorf("cgroup %s: %w", dir, err)
		}
		g.Dirs[w.controller] = dir
		// The period before the quota: a quota is checked against it.
		// memsw (memory and swap) after the memory limit, which it may
		// not be under: no swap beyond the limit, as runc sets it.
		for _, file := range []string{"cpu.cfs_period_us", "cpu.cfs_quota_us", "memory.limit_in_bytes", "memory.memsw.limit_in_bytes"} {
			v, ok := w.files[file]
			if !ok {
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, file)); err != nil && file == "memory.memsw.limit_in_bytes" {
				continue // no swap accounting
			}
			if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
				g.Remove()
				return Group{}, nil, fmt.Errorf("cgroup %s: %s: %w", dir, file, err)
			}
		}
	}
	return g, unenforced, nil
}

// Find is the group named name an earlier run of the agent made (for a
// container it adopts): its cgroups that exist.
func (h Hierarchy) Find(name string) Group {
	g := Group{Dirs: map[string]string{}}
	for c, base := range h.dirs {
		if dir := filepath.Join(base, name); name != "" && isDir(dir) {
			g.Dirs[c] = dir
		}
	}
	return g
}

// RemoveAll removes every group whose name starts with prefix (svcnet-…):
// those of a pod that is gone. Groups with processes left stay.
func (h Hierarchy) RemoveAll(prefix string) error {
	if !strings.HasPrefix(prefix, "svcnet-") {
		return fmt.Errorf("cgroup prefix %q: not svcnet's", prefix)
	}
	var errs []error
	for _, base := range h.dirs {
		matches, _ := filepath.Glob(filepath.Join(base, prefix+"*"))
		for _, m := range matches {
			if err := os.Remove(m); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// Procs are the files a process writes "0" to, to join the group.
func (g Group) Procs() []string {
	var out []string
	for _, d := range g.Dirs {
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	return out
}

// OOMKilled reports whether the kernel's OOM killer killed a process of
// the group (for a container that ended with SIGKILL).
func (g Group) OOMKilled() bool {
	dir := g.Dirs[Memory]
	if dir == "" {
		return false
	}
	data, err := os.ReadFile(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			return err == nil && n > 0
		}
	}
	return false
}

// Remove removes the group's cgroups (their processes gone).
func (g Group) Remove() error {
	var errs []error
	for _, d := range g.Dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Join moves the calling process into the groups whose cgroup.procs
// files are procs ("0": the caller, in whatever PID namespace it is).
func Join(procs []string) error {
	for _, p := range procs {
		if err := os.WriteFile(p, []byte("0"), 0o644); err != nil {
			return fmt.Errorf("join cgroup %s: %w", filepath.Dir(p), err)
		}
	}
	return nil
}
