package cluster_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

// TestHonestRefusals: commands that cannot work say so at once and exit
// non-zero, leaving nothing behind.
func TestHonestRefusals(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("svcnet up and down need root; CI runs as root")
	}
	c := &localCluster{t: t, name: fmt.Sprintf("e2e%d", rand.IntN(1e6)), home: t.TempDir(), bin: framework.Binary(t)}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"a proxy mode this kernel cannot run", []string{"up", "--name", c.name, "--proxy-mode", "ipvs"}, "this kernel has no IPVS (no ip_vs module, none built in); modes that work on this kernel: iptables, userspace, nftables, ebpf"},
		{"an unknown proxy mode", []string{"up", "--name", c.name, "--proxy-mode", "kernelspace"}, "unknown proxy mode"},
		{"a bad node-port range", []string{"up", "--name", c.name, "--service-node-port-range", "9000-8000"}, "--service-node-port-range"},
		{"down of a cluster that does not exist", []string{"down", "--name", c.name + "typo"}, "no cluster"},
	}
	for _, tc := range cases {
		start := time.Now()
		out, err := c.svcnet(tc.args...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%s: svcnet %s: %v\n%s\nwant a failure saying %q", tc.name, strings.Join(tc.args, " "), err, out, tc.want)
		}
		// At once: nothing was started that had to fail first.
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%s: took %s to refuse", tc.name, d)
		}
	}
	if _, err := os.Stat(c.home + "/" + c.name); err == nil {
		t.Errorf("a refused up left state in %s", c.home)
	}
}
