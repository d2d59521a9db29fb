package framework

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/svcnet/svcnet/internal/bpflb"
)

// NewCgroup makes the cgroup v2 group svcnet-test-<what>-<random> below
// the machine's cgroup2 mount (for the ebpf mode's programs) and removes
// it when the test ends, its processes gone.
func NewCgroup(t testing.TB, what string) string {
	t.Helper()
	mount, err := bpflb.Cgroup2Mount()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(mount, fmt.Sprintf("svcnet-test-%s-%d", what, rand.IntN(1e9)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
			t.Errorf("remove cgroup %s: %v", dir, err)
		}
	})
	return dir
}
