package cluster_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

// BenchmarkUp times `svcnet up` of a 3-node cluster until it is ready
// (nodes Ready, cluster DNS serving), then removes it. Run with
//
//	go test ./test/e2e/cluster -run - -bench Up -benchtime 5x
func BenchmarkUp(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("svcnet up needs root")
	}
	bin := framework.Binary(b)
	home := b.TempDir()
	var times []time.Duration
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("bench%d", rand.IntN(1e6))
		run := func(args ...string) {
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), "SVCNET_HOME="+home)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("svcnet %v: %v\n%s", args, err, out)
			}
		}
		start := time.Now()
		run("up", "--name", name, "--nodes", "3", "--api-port", fmt.Sprint(26443+i))
		times = append(times, time.Since(start))
		run("down", "--name", name)
	}
	slices.Sort(times)
	b.ReportMetric(times[len(times)/2].Seconds(), "up-median-s")
	b.ReportMetric(times[len(times)-1].Seconds(), "up-max-s")
}
