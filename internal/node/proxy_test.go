package node

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestAdoptDaemon: a daemon left running by a crashed agent is found by
// its pid file and command line, never by a pid alone, and stopped when
// the adopting agent stops.
func TestAdoptDaemon(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	argv := []string{sleep, "30"}
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	// Start returns once the exec is past its point of no return, which
	// can be before the new program's command line is in place: an
	// adopting agent only ever meets a daemon that has run for a while.
	cmdline := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline"
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if b, _ := os.ReadFile(cmdline); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed empty", cmdline)
		}
	}
	pidPath := filepath.Join(t.TempDir(), "proxy.pid")
	if got := adoptable(pidPath, argv); got != 0 {
		t.Errorf("no pid file: adopted %d", got)
	}
	if err := os.WriteFile(pidPath, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		argv []string
		want int
	}{
		{"same command line", argv, cmd.Process.Pid},
		{"another command line (a reused pid)", []string{sleep, "31"}, 0},
	}
	for _, tc := range cases {
		if got := adoptable(pidPath, tc.argv); got != tc.want {
			t.Errorf("%s: adopted %d, want %d", tc.name, got, tc.want)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { waitGone(ctx, cmd.Process.Pid); close(done) }()
	select {
	case <-done:
		t.Fatal("waitGone returned while the daemon runs")
	case <-time.After(300 * time.Millisecond):
	}
	cancel()
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatal("the adopted daemon was not stopped when the agent stopped")
	}
	<-done
	if got := adoptable(pidPath, argv); got != 0 {
		t.Errorf("after it exited: adopted %d", got)
	}
}
