package cluster_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDownAfterCrash: when the cluster's supervisor dies (kill -9), its
// children keep running; `svcnet down` still removes everything, which
// up's cleanup checks.
func TestDownAfterCrash(t *testing.T) {
	t.Parallel()
	c := up(t, 1)
	pidData, err := os.ReadFile(filepath.Join(c.home, c.name, "supervisor.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidData)))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.until("the supervisor to be gone", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	out, _ := c.svcnet("status", "--name", c.name)
	if !strings.Contains(out, "NOT RUNNING") {
		t.Errorf("status after a crash:\n%s", out)
	}
}
