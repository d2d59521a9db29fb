// Package cgroups enforces containers' resource limits with the kernel's
// control groups, in cgroups svcnet makes for them: a memory limit with
// the memory controller (no swap beyond it), a CPU limit as a CFS quota
// with the cpu controller. Where the machine mounts those controllers in
// cgroup v1 hierarchies, the groups are made under the node agent's own
// cgroup there (so that nothing else of the machine's changes); where
// only a cgroup2 hierarchy has them (most machines today), under one
// directory svcnet makes below the hierarchy's root, svcnet/, as
// kubelet's cgroupfs driver makes kubepods/: a cgroup2 group cannot hand
// controllers to children while it holds processes itself, so they
// cannot go under the agent's own cgroup, which holds the agent. A
// container's process joins its groups before its command starts
// (runtime.ExecOptions.Cgroups); a container killed by the kernel's OOM
// killer inside its group is OOMKilled. A limit the machine cannot
// enforce (its controller is missing, or the hierarchy is not svcnet's
// to change, as inside a container) is reported as not enforced (an
// event on the pod), never silently dropped.
package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
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
// hierarchy; else, for the controllers a cgroup2 hierarchy's root hands
// to its children, unified (<mount>/svcnet, or the node's group).
type Hierarchy struct {
	dirs map[string]string
	// unified is svcnet's directory in the cgroup2 hierarchy, and v2 the
	// controllers svcnet takes from there.
	unified string
	v2      map[string]bool
	// node: every container gets a cgroup2 group of its own in unified,
	// the node's group (see Under), limits or not.
	node bool
}

// Unified is the cgroup2 group key of a Group's Dirs: the group every
// container of a node with a group of its own is in, whatever the
// controllers.
const Unified = "cgroup2"

// Under makes root, a cgroup2 group below the hierarchy's root named
// svcnet-…, the node's group: every container joins a group of its own
// below it (with the cgroup2 controllers the machine hands down), so
// that what is attached to root (the ebpf proxy mode's programs) applies
// to every process of the node's pods.
func (h Hierarchy) Under(root string) (Hierarchy, error) {
	if !strings.HasPrefix(filepath.Base(root), "svcnet-") {
		return h, fmt.Errorf("cgroup root %s: svcnet's cgroups are named svcnet-…", root)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(root), &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		return h, fmt.Errorf("cgroup root %s: not in a cgroup v2 hierarchy", root)
	}
	h.unified, h.node = root, true
	return h, nil
}

// PerContainer says every container gets groups, limits or not (the
// node has a group of its own).
func (h Hierarchy) PerContainer() bool { return h.node }

// ProcsOf are the cgroup.procs files of svcnet's groups (svcnet-…) that
// process pid is in: what a process started in a running container
// (kubectl exec, a probe) joins, so that it is counted and treated as
// the container is.
func ProcsOf(pid int) []string {
	return procsOf(fmt.Sprintf("/proc/%d/cgroup", pid), "/proc/self/mountinfo")
}

func procsOf(cgroupFile, mountinfo string) []string {
	data, err := os.ReadFile(cgroupFile)
	if err != nil {
		return nil
	}
	mi, err := os.ReadFile(mountinfo)
	if err != nil {
		return nil
	}
	// Where the hierarchies are mounted: cgroup2's, and each v1 one
	// with its mount options (its controllers, a named one's name=).
	unified := ""
	type v1mount struct {
		dir  string
		opts map[string]bool
	}
	var v1 []v1mount
	for line := range strings.SplitSeq(string(mi), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		fields, after := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(after) < 3 || fields[3] != "/" {
			continue
		}
		switch after[0] {
		case "cgroup2":
			if unified == "" {
				unified = fields[4]
			}
		case "cgroup":
			m := v1mount{dir: fields[4], opts: map[string]bool{}}
			for opt := range strings.SplitSeq(after[2], ",") {
				m.opts[opt] = true
			}
			v1 = append(v1, m)
		}
	}
	mountOf := func(ctrls string) string {
		if ctrls == "" {
			return unified
		}
		for _, m := range v1 {
			all := true
			for c := range strings.SplitSeq(ctrls, ",") {
				all = all && m.opts[c]
			}
			if all {
				return m.dir
			}
		}
		return ""
	}
	var out []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(filepath.Base(parts[2]), "svcnet-") {
			continue
		}
		if mount := mountOf(parts[1]); mount != "" {
			out = append(out, filepath.Join(mount, parts[2], "cgroup.procs"))
		}
	}
	slices.Sort(out)
	return out
}

// unifiedDir is the directory svcnet makes its groups in, below the
// root of a cgroup2 hierarchy.
const unifiedDir = "svcnet"

// Detect finds the agent's cgroups from /proc/self/cgroup and the
// machine's mounts.
func Detect() Hierarchy {
	return detect("/proc/self/cgroup", "/proc/self/mountinfo")
}

func detect(cgroupFile, mountinfo string) Hierarchy {
	h := Hierarchy{dirs: map[string]string{}, v2: map[string]bool{}}
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
	unified := ""
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, after := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(after) < 3 {
			continue
		}
		root, point := fields[3], fields[4]
		if after[0] == "cgroup2" && root == "/" && unified == "" {
			unified = point
			continue
		}
		if after[0] != "cgroup" {
			continue
		}
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
	if unified == "" {
		return h
	}
	// The controllers the root hands to its children, that no v1
	// hierarchy has.
	data, err := os.ReadFile(filepath.Join(unified, "cgroup.subtree_control"))
	if err != nil {
		return h
	}
	for _, c := range strings.Fields(string(data)) {
		if (c == Memory || c == CPU) && h.dirs[c] == "" {
			h.v2[c] = true
			h.unified = filepath.Join(unified, unifiedDir)
		}
	}
	return h
}

// Has reports whether the machine offers controller c.
func (h Hierarchy) Has(c string) bool { return h.dirs[c] != "" || h.v2[c] }

// String says where the groups go, for logs.
func (h Hierarchy) String() string {
	var parts []string
	for _, c := range []string{Memory, CPU} {
		switch {
		case h.dirs[c] != "":
			parts = append(parts, c+" (v1) "+h.dirs[c])
		case h.v2[c]:
			parts = append(parts, c+" (v2) "+h.unified)
		default:
			parts = append(parts, c+" none")
		}
	}
	if h.node {
		parts = append(parts, "every container in "+h.unified)
	}
	return strings.Join(parts, ", ")
}

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
	// Per controller, its files in write order: the period before the
	// quota (a quota is checked against it); memory and swap after the
	// memory limit, which it may not be under (v1): no swap beyond the
	// limit, as runc sets it. A swap file that is missing means no swap
	// accounting.
	quota := strconv.FormatInt(max(l.CPUMilli*cfsPeriod/1000, 1000), 10)
	mem := strconv.FormatInt(l.MemoryBytes, 10)
	want := []struct {
		controller string
		on         bool
		v1, v2     [][2]string
	}{
		{Memory, l.MemoryBytes > 0,
			[][2]string{{"memory.limit_in_bytes", mem}, {"memory.memsw.limit_in_bytes", mem}},
			[][2]string{{"memory.max", mem}, {"memory.swap.max", "0"}}},
		{CPU, l.CPUMilli > 0,
			[][2]string{{"cpu.cfs_period_us", strconv.Itoa(cfsPeriod)}, {"cpu.cfs_quota_us", quota}},
			[][2]string{{"cpu.max", quota + " " + strconv.Itoa(cfsPeriod)}}},
		// A node's group: the container's own group below it, whatever
		// its limits.
		{Unified, h.node, nil, nil},
	}
	v2Ready := false
	for _, w := range want {
		if !w.on {
			continue
		}
		var dir string
		var files [][2]string
		switch {
		case h.dirs[w.controller] != "":
			dir, files = filepath.Join(h.dirs[w.controller], name), w.v1
		case h.v2[w.controller] || w.controller == Unified:
			if !v2Ready {
				if err := h.prepareUnified(); err != nil {
					if !notOurs(err) || w.controller == Unified {
						g.Remove()
						return Group{}, nil, err
					}
					unenforced = append(unenforced, w.controller)
					continue
				}
				v2Ready = true
			}
			dir, files = filepath.Join(h.unified, name), w.v2
		default:
			unenforced = append(unenforced, w.controller)
			continue
		}
		if _, made := g.dirSet()[dir]; !made {
			_ = os.Remove(dir) // an earlier start's, empty
			if err := os.Mkdir(dir, 0o755); err != nil {
				if notOurs(err) && w.controller != Unified {
					unenforced = append(unenforced, w.controller)
					continue
				}
				g.Remove()
				return Group{}, nil, fmt.Errorf("cgroup %s: %w", dir, err)
			}
		}
		g.Dirs[w.controller] = dir
		for _, f := range files {
			path := filepath.Join(dir, f[0])
			if _, err := os.Stat(path); err != nil && strings.Contains(f[0], "sw") {
				continue // no swap accounting
			}
			if err := os.WriteFile(path, []byte(f[1]), 0o644); err != nil {
				g.Remove()
				return Group{}, nil, fmt.Errorf("cgroup %s: %s: %w", dir, f[0], err)
			}
		}
	}
	return g, unenforced, nil
}

// notOurs tells the errors of a hierarchy that is mounted but not
// svcnet's to change (a container's view of it).
func notOurs(err error) bool {
	return errors.Is(err, unix.EROFS) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EBUSY)
}

// prepareUnified makes svcnet's directory in the cgroup2 hierarchy and
// hands it the controllers it takes from there, for its groups.
func (h Hierarchy) prepareUnified() error {
	if err := os.Mkdir(h.unified, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("cgroup %s: %w", h.unified, err)
	}
	var enable []string
	for _, c := range []string{CPU, Memory} {
		if h.v2[c] {
			enable = append(enable, "+"+c)
		}
	}
	if len(enable) == 0 {
		return nil
	}
	if err := os.WriteFile(filepath.Join(h.unified, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: enable %s: %w", h.unified, strings.Join(enable, " "), err)
	}
	return nil
}

// Find is the group named name an earlier run of the agent made (for a
// container it adopts): its cgroups that exist.
func (h Hierarchy) Find(name string) Group {
	g := Group{Dirs: map[string]string{}}
	for c, base := range h.bases() {
		if dir := filepath.Join(base, name); name != "" && isDir(dir) {
			g.Dirs[c] = dir
		}
	}
	return g
}

// bases are the directories groups are made in, by controller.
func (h Hierarchy) bases() map[string]string {
	out := map[string]string{}
	for c, d := range h.dirs {
		out[c] = d
	}
	for c := range h.v2 {
		out[c] = h.unified
	}
	if h.node {
		out[Unified] = h.unified
	}
	return out
}

// RemoveAll removes every group whose name starts with prefix (svcnet-…):
// those of a pod that is gone. Groups with processes left stay.
func (h Hierarchy) RemoveAll(prefix string) error {
	if !strings.HasPrefix(prefix, "svcnet-") {
		return fmt.Errorf("cgroup prefix %q: not svcnet's", prefix)
	}
	var errs []error
	for base := range maps.Values(h.bases()) {
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

// dirSet is the group's directories, each once (in cgroup2 one holds
// every controller).
func (g Group) dirSet() map[string]struct{} {
	out := map[string]struct{}{}
	for _, d := range g.Dirs {
		out[d] = struct{}{}
	}
	return out
}

// Procs are the files a process writes "0" to, to join the group.
func (g Group) Procs() []string {
	var out []string
	for d := range g.dirSet() {
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	slices.Sort(out)
	return out
}

// OOMKilled reports whether the kernel's OOM killer killed a process of
// the group (for a container that ended with SIGKILL).
func (g Group) OOMKilled() bool {
	dir := g.Dirs[Memory]
	if dir == "" {
		return false
	}
	// v1 counts in memory.oom_control, cgroup2 in memory.events.
	data, err := os.ReadFile(filepath.Join(dir, "memory.oom_control"))
	if errors.Is(err, os.ErrNotExist) {
		data, err = os.ReadFile(filepath.Join(dir, "memory.events"))
	}
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
	for d := range g.dirSet() {
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
