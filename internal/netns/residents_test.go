package netns

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	vnetns "github.com/vishvananda/netns"
)

// visitEnv makes the test binary a visitor: its main thread enters the
// named namespace while the runtime's other threads stay outside.
const visitEnv = "SVCNET_TEST_VISIT_NETNS"

func init() {
	name := os.Getenv(visitEnv)
	if name == "" {
		return
	}
	runtime.LockOSThread() // init runs on the main thread: keep it there
	ns, err := vnetns.GetFromPath(Path(name))
	if err == nil {
		err = vnetns.Set(ns)
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	time.Sleep(time.Minute)
	os.Exit(0)
}

func TestResidents(t *testing.T) {
	requireRoot(t)
	prefix := fmt.Sprintf("svcnet-test-res-%d-", rand.IntN(1e9))
	name := prefix + "a"
	t.Cleanup(func() { _ = Delete(name) })
	if err := Create(name); err != nil {
		t.Fatal(err)
	}
	start := func(cmd *exec.Cmd) *exec.Cmd {
		t.Helper()
		cmd.SysProcAttr = nil
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	resident := start(exec.Command("ip", "netns", "exec", name, "sleep", "60"))
	visitor := exec.Command(os.Args[0], "-test.run=^$")
	visitor.Env = append(os.Environ(), visitEnv+"="+name)
	out, err := visitor.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start(visitor)
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("visitor: %q", line)
	}
	var got []int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		// ip netns exec enters the namespace, then execs sleep.
		if got = Residents(prefix); slices.Contains(got, resident.Process.Pid) {
			break
		}
	}
	tests := []struct {
		what string
		pid  int
		want bool
	}{
		{"a process started inside", resident.Process.Pid, true},
		{"a process whose main thread alone is inside", visitor.Process.Pid, false},
		{"the caller", os.Getpid(), false},
	}
	for _, tt := range tests {
		if slices.Contains(got, tt.pid) != tt.want {
			t.Errorf("%s (pid %d): resident = %v, want %v (residents %v)", tt.what, tt.pid, !tt.want, tt.want, got)
		}
	}
	if got := Residents(prefix + "none-"); len(got) != 0 {
		t.Errorf("residents of no namespace: %v", got)
	}
}
