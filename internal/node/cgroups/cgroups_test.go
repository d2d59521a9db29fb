package cgroups

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDetect: the agent's cgroups in each v1 hierarchy that mounts the
// memory or cpu controller; none on a machine with cgroup2 only.
func TestDetect(t *testing.T) {
	v1mounts := `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	cases := []struct {
		name, cgroup, mounts string
		want                 map[string]string
	}{
		{"v1", "4:memory:/process_api/abc\n1:cpu,cpuacct:/\n0::/\n", v1mounts,
			map[string]string{Memory: "/sys/fs/cgroup/memory/process_api/abc", CPU: "/sys/fs/cgroup/cpu,cpuacct"}},
		{"a mount of part of the hierarchy", "4:memory:/docker/x/agent\n", "35 31 0:32 /docker/x /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
			map[string]string{Memory: "/sys/fs/cgroup/memory/agent"}},
		{"cgroup2 only", "0::/user.slice/session-1.scope\n", "30 23 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n",
			map[string]string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cg, mi := filepath.Join(dir, "cgroup"), filepath.Join(dir, "mountinfo")
			_ = os.WriteFile(cg, []byte(tc.cgroup), 0o644)
			_ = os.WriteFile(mi, []byte(tc.mounts), 0o644)
			h := detect(cg, mi)
			if fmt.Sprint(h.dirs) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", h.dirs, tc.want)
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
	if !h.Has(Memory) || !h.Has(CPU) {
		t.Fatalf("this machine offers cgroup v1 memory and cpu controllers (FACTS), found %v", h.dirs)
	}
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
	if q, p := read(CPU, "cpu.cfs_quota_us"), read(CPU, "cpu.cfs_period_us"); q != "25000" || p != "100000" {
		t.Errorf("CPU quota %s per %s µs, want 25000 per 100000 (250m)", q, p)
	}
	if got := read(Memory, "memory.limit_in_bytes"); got != fmt.Sprint(16<<20) {
		t.Errorf("memory limit %s", got)
	}
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
