package cgroups

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/bpflb"
	"github.com/svcnet/svcnet/test/vm"
)

// TestDetect: the agent's cgroups in each v1 hierarchy that mounts the
// memory or cpu controller; on a machine with cgroup2 only, svcnet's
// directory below its root for the controllers the root hands down.
func TestDetect(t *testing.T) {
	v1mounts := `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / UNIFIED rw,relatime - cgroup2 cgroup2 rw
`
	cases := []struct {
		name, cgroup, mounts string
		subtree              string // the cgroup2 root's cgroup.subtree_control
		want                 map[string]string
		wantV2               []string
	}{
		{"v1", "4:memory:/process_api/abc\n1:cpu,cpuacct:/\n0::/\n", v1mounts, "hugetlb",
			map[string]string{Memory: "/sys/fs/cgroup/memory/process_api/abc", CPU: "/sys/fs/cgroup/cpu,cpuacct"}, nil},
		{"v1 beside a cgroup2 that has the controllers", "4:memory:/a\n1:cpu,cpuacct:/\n0::/\n", v1mounts, "cpu memory pids",
			map[string]string{Memory: "/sys/fs/cgroup/memory/a", CPU: "/sys/fs/cgroup/cpu,cpuacct"}, nil},
		{"a mount of part of the hierarchy", "4:memory:/docker/x/agent\n", "35 31 0:32 /docker/x /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n", "",
			map[string]string{Memory: "/sys/fs/cgroup/memory/agent"}, nil},
		{"cgroup2 only", "0::/user.slice/session-1.scope\n", "30 23 0:27 / UNIFIED rw - cgroup2 cgroup2 rw,nsdelegate\n", "cpuset cpu io memory pids",
			map[string]string{}, []string{CPU, Memory}},
		{"cgroup2 whose root hands down no memory", "0::/\n", "30 23 0:27 / UNIFIED rw - cgroup2 cgroup2 rw\n", "cpu pids",
			map[string]string{}, []string{CPU}},
		{"a container's view of cgroup2", "0::/\n", "30 23 0:27 /kubepods/pod1 UNIFIED rw - cgroup2 cgroup2 rw\n", "cpu memory",
			map[string]string{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			unified := filepath.Join(dir, "unified")
			_ = os.Mkdir(unified, 0o755)
			_ = os.WriteFile(filepath.Join(unified, "cgroup.subtree_control"), []byte(tc.subtree+"\n"), 0o644)
			cg, mi := filepath.Join(dir, "cgroup"), filepath.Join(dir, "mountinfo")
			_ = os.WriteFile(cg, []byte(tc.cgroup), 0o644)
			_ = os.WriteFile(mi, []byte(strings.ReplaceAll(tc.mounts, "UNIFIED", unified)), 0o644)
			h := detect(cg, mi)
			if fmt.Sprint(h.dirs) != fmt.Sprint(tc.want) {
				t.Errorf("v1: got %v, want %v", h.dirs, tc.want)
			}
			var v2 []string
			for _, c := range []string{CPU, Memory} {
				if h.v2[c] {
					v2 = append(v2, c)
				}
			}
			if !slices.Equal(v2, tc.wantV2) {
				t.Errorf("cgroup2 controllers %v, want %v", v2, tc.wantV2)
			}
			if wantDir := filepath.Join(unified, "svcnet"); len(tc.wantV2) > 0 && h.unified != wantDir {
				t.Errorf("cgroup2 groups in %q, want %q", h.unified, wantDir)
			}
			for _, c := range []string{CPU, Memory} {
				if h.Has(c) != (tc.want[c] != "" || slices.Contains(tc.wantV2, c)) {
					t.Errorf("Has(%s) = %v", c, h.Has(c))
				}
			}
		})
	}
}

// TestLimits: on this machine's own cgroups, a group enforces a memory
// limit (a process allocating past it is killed, and that is told as an
// OOM kill) and a CPU quota; Find and RemoveAll find svcnet's groups.
func TestLimits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups take root; CI runs as root")
	}
	h := Detect()
	if h.dirs[Memory] == "" || h.dirs[CPU] == "" {
		t.Fatalf("this machine offers cgroup v1 memory and cpu controllers (docs/architecture.md), found %v", h)
	}
	testLimits(t, h, func(read func(c, file string) string) {
		if q, p := read(CPU, "cpu.cfs_quota_us"), read(CPU, "cpu.cfs_period_us"); q != "25000" || p != "100000" {
			t.Errorf("CPU quota %s per %s µs, want 25000 per 100000 (250m)", q, p)
		}
		if got := read(Memory, "memory.limit_in_bytes"); got != fmt.Sprint(16<<20) {
			t.Errorf("memory limit %s", got)
		}
	})
}

// TestLimitsCgroup2 is TestLimits on a machine whose controllers are in
// a cgroup2 hierarchy only: the VM's (this machine's are in v1).
func TestLimitsCgroup2(t *testing.T) {
	if !vm.Inside(t, vm.Config{Timeout: 3 * time.Minute}) {
		return
	}
	// The VM boots with a cgroup2 hierarchy whose root hands nothing
	// down; a machine that runs services (systemd) hands down these.
	if err := os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+cpu +memory"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := Detect()
	if len(h.dirs) > 0 || !h.v2[Memory] || !h.v2[CPU] || h.unified != "/sys/fs/cgroup/svcnet" {
		t.Fatalf("the VM's cgroup2 hierarchy: found %v", h)
	}
	testLimits(t, h, func(read func(c, file string) string) {
		if got := read(CPU, "cpu.max"); got != "25000 100000" {
			t.Errorf("cpu.max %q, want 25000 per 100000 (250m)", got)
		}
		if got := read(Memory, "memory.max"); got != fmt.Sprint(16<<20) {
			t.Errorf("memory.max %s", got)
		}
		if g := read(Memory, "cgroup.controllers"); !strings.Contains(g, "memory") || !strings.Contains(g, "cpu") {
			t.Errorf("the group's controllers: %q", g)
		}
	})
	if err := os.Remove(h.unified); err != nil {
		t.Errorf("svcnet's directory, its groups gone: %v", err)
	}
	// Below a node's group: the controllers handed down one level more.
	nh, err := h.Under("/sys/fs/cgroup/svcnet-test-node")
	if err != nil {
		t.Fatal(err)
	}
	testLimits(t, nh, func(read func(c, file string) string) {
		if got := read(Memory, "memory.max"); got != fmt.Sprint(16<<20) {
			t.Errorf("memory.max below the node's group: %s", got)
		}
	})
	if err := os.Remove(nh.unified); err != nil {
		t.Errorf("the node's group, its groups gone: %v", err)
	}
}

// TestNodeGroup: with a node's group, every container gets a cgroup2
// group below it, limits or not, which its processes join; a group not
// named svcnet-…, or outside cgroup2, is refused.
func TestNodeGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups take root; CI runs as root")
	}
	mount, err := bpflb.Cgroup2Mount()
	if err != nil {
		t.Fatalf("%v (docs/architecture.md: this machine has one beside v1)", err)
	}
	root := filepath.Join(mount, fmt.Sprintf("svcnet-test-node-%d", rand.IntN(1e9)))
	h, err := Detect().Under(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(root) })
	for _, bad := range []string{filepath.Join(mount, "kubepods"), "/tmp/svcnet-x"} {
		if _, err := Detect().Under(bad); err == nil {
			t.Errorf("Under(%s) accepted it", bad)
		}
	}
	name := fmt.Sprintf("svcnet-test-%d-c", rand.IntN(1e9))
	g, unenforced, err := h.Create(name, Limits{})
	if err != nil || len(unenforced) > 0 {
		t.Fatal(err, unenforced)
	}
	t.Cleanup(func() { _ = g.Remove() })
	if want := filepath.Join(root, name); g.Dirs[Unified] != want {
		t.Fatalf("groups %v, want the container's in %s", g.Dirs, want)
	}
	script := fmt.Sprintf("for f in %s; do echo 0 > $f; done; cat /proc/self/cgroup", strings.Join(g.Procs(), " "))
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "0::/"+filepath.Base(root)+"/"+name+"\n") {
		t.Errorf("the process's groups: %v\n%s", err, out)
	}
	if err := h.RemoveAll(strings.TrimSuffix(name, "c")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(root); err != nil {
		t.Errorf("the node's group, its groups gone: %v", err)
	}
}

// testLimits: a group of h enforces a memory limit (a process
// allocating past it is killed, and that is told as an OOM kill) and a
// CPU quota, which check reads; Find and RemoveAll find svcnet's groups.
func testLimits(t *testing.T, h Hierarchy, check func(read func(c, file string) string)) {
	name := fmt.Sprintf("svcnet-test-%d-c", rand.IntN(1e9))
	g, unenforced, err := h.Create(name, Limits{MemoryBytes: 16 << 20, CPUMilli: 250})
	if err != nil || len(unenforced) > 0 {
		t.Fatal(err, unenforced)
	}
	t.Cleanup(func() { _ = g.Remove() })
	read := func(c, file string) string {
		b, _ := os.ReadFile(filepath.Join(g.Dirs[c], file))
		return strings.TrimSpace(string(b))
	}
	check(read)
	if g.OOMKilled() {
		t.Error("a new group counts an OOM kill")
	}
	// The shell joins (it writes 0: itself), then becomes dd, whose
	// 64 MiB buffer is four times the limit.
	script := fmt.Sprintf("for f in %s; do echo 0 > $f; done; exec dd if=/dev/zero of=/dev/null bs=64M count=1", strings.Join(g.Procs(), " "))
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("dd past the limit: %v: %s", err, out)
	}
	if !g.OOMKilled() {
		t.Error("the kill is not counted as the OOM killer's")
	}
	if f := h.Find(name); fmt.Sprint(f.Dirs) != fmt.Sprint(g.Dirs) {
		t.Errorf("Find: %v, want %v", f.Dirs, g.Dirs)
	}
	if err := h.RemoveAll(strings.TrimSuffix(name, "c")); err != nil {
		t.Fatal(err)
	}
	for _, d := range g.Dirs {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s left", d)
		}
	}
	if _, _, err := h.Create("not-svcnet", Limits{MemoryBytes: 1 << 20}); err == nil {
		t.Error("a cgroup not named svcnet-… was made")
	}
	if err := h.RemoveAll("x"); err == nil {
		t.Error("RemoveAll took a prefix not svcnet's")
	}
}

// TestProcsOf: a process's svcnet groups, in every hierarchy mounted.
func TestProcsOf(t *testing.T) {
	mounts := `32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	cgroup := "9:name=systemd:/svcnet-not-this-one\n4:memory:/process_api/x/svcnet-uid-web\n1:cpu,cpuacct:/\n0::/svcnet-c-node-1/svcnet-uid-web\n"
	dir := t.TempDir()
	cg, mi := filepath.Join(dir, "cgroup"), filepath.Join(dir, "mountinfo")
	_ = os.WriteFile(cg, []byte(cgroup), 0o644)
	_ = os.WriteFile(mi, []byte(mounts), 0o644)
	want := []string{"/sys/fs/cgroup/memory/process_api/x/svcnet-uid-web/cgroup.procs",
		"/sys/fs/cgroup/systemd/svcnet-not-this-one/cgroup.procs",
		"/sys/fs/cgroup/unified/svcnet-c-node-1/svcnet-uid-web/cgroup.procs"}
	if got := procsOf(cg, mi); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
