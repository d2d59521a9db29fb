package vm

import (
	"context"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
)

// InVM reports whether this process runs inside the VM.
func InVM() bool { return os.Getenv("SVCNET_IN_VM") == "1" }

// LaterEnv, set to 1, defers the VM's tests: make test runs the other
// tests first with it set, then the VM's on their own, because two
// emulated CPUs take both of the machine's cores and starve the clusters
// of the tests beside them (a rollout test lost requests so).
const LaterEnv = "SVCNET_VM_LATER"

// Later skips tb when the VM's tests are deferred to their own phase.
func Later(tb testing.TB) {
	tb.Helper()
	if !InVM() && os.Getenv(LaterEnv) == "1" {
		tb.Skip("runs in make test's VM phase, after the other tests (" + LaterEnv + "=1)")
	}
}

// Inside runs the calling test in the VM. On the host it boots the VM
// with this same test binary limited to this test, reports its output,
// fails the test if it failed there, and returns false: the caller
// returns. Inside the VM it returns true and the test body runs. Flags
// like -test.v pass through; cfg.Command and cfg.Dir are set here.
//
//	func TestIPVS(t *testing.T) {
//		if !vm.Inside(t, vm.Config{Timeout: 5 * time.Minute}) {
//			return
//		}
//		… runs with IPVS …
//	}
func Inside(t *testing.T, cfg Config) bool {
	t.Helper()
	return inside(t, cfg, "-test.run", runPattern(t.Name()), "-test.count=1", "-test.v")
}

// InsideB is Inside for a benchmark: the VM runs only it, with this
// process's -test.benchtime.
//
//	go test ./test/e2e/proxy -run '^$' -bench ProxyModesVM -benchtime 50x -timeout 3h
func InsideB(b *testing.B, cfg Config) bool {
	b.Helper()
	benchtime, pattern := "1x", runPattern(b.Name())
	if f := flag.Lookup("test.benchtime"); f != nil {
		benchtime = f.Value.String()
	}
	// The -bench given to this process may name sub-benchmarks
	// (ProxyModesVM/ipvs/services=1000): the VM gets it as it is.
	if f := flag.Lookup("test.bench"); f != nil && strings.Contains(f.Value.String(), "/") {
		pattern = f.Value.String()
	}
	return inside(b, cfg, "-test.run", "^$", "-test.bench", pattern, "-test.benchtime", benchtime, "-test.v")
}

func runPattern(name string) string {
	var run []string
	for _, part := range strings.Split(name, "/") {
		run = append(run, "^"+regexp.QuoteMeta(part)+"$")
	}
	return strings.Join(run, "/")
}

func inside(tb testing.TB, cfg Config, args ...string) bool {
	tb.Helper()
	if InVM() {
		return true
	}
	Later(tb)
	bin, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Command = append(append([]string{bin}, args...), cfg.Command...)
	if cfg.Dir == "" {
		cfg.Dir, _ = os.Getwd()
	}
	res, err := Run(context.Background(), cfg)
	if res != nil {
		tb.Logf("in the VM (%.1fs):\n%s", res.Elapsed.Seconds(), res.Output)
	}
	if err != nil {
		tb.Fatal(err)
	}
	if res.ExitCode != 0 {
		tb.Fatalf("the test failed in the VM (exit code %d)", res.ExitCode)
	}
	if _, isT := tb.(*testing.T); isT && !strings.Contains(string(res.Output), "--- PASS: "+tb.Name()) {
		tb.Fatalf("the test did not run in the VM (no PASS line for %s)", tb.Name())
	}
	return false
}
