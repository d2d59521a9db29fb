package vm

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
)

// InVM reports whether this process runs inside the VM.
func InVM() bool { return os.Getenv("SVCNET_IN_VM") == "1" }

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
	if InVM() {
		return true
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var run []string
	for _, part := range strings.Split(t.Name(), "/") {
		run = append(run, "^"+regexp.QuoteMeta(part)+"$")
	}
	cfg.Command = append([]string{bin, "-test.run", strings.Join(run, "/"), "-test.count=1", "-test.v"}, cfg.Command...)
	if cfg.Dir == "" {
		cfg.Dir, _ = os.Getwd()
	}
	res, err := Run(context.Background(), cfg)
	if res != nil {
		t.Logf("in the VM (%.1fs):\n%s", res.Elapsed.Seconds(), res.Output)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("the test failed in the VM (exit code %d)", res.ExitCode)
	}
	if !strings.Contains(string(res.Output), "--- PASS: "+t.Name()) {
		t.Fatalf("the test did not run in the VM (no PASS line for %s)", t.Name())
	}
	return false
}
