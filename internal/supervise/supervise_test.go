package supervise

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/restart"
)

// quick restarts at once, for tests.
var quick = restart.Policy{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond, ResetAfter: time.Hour}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

// lines reads a file of one line per event.
func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// pids collects OnStart's pids.
type pids struct {
	mu  sync.Mutex
	all []int
}

func (p *pids) add(pid int) { p.mu.Lock(); p.all = append(p.all, pid); p.mu.Unlock() }
func (p *pids) n() int      { p.mu.Lock(); defer p.mu.Unlock(); return len(p.all) }
func (p *pids) last() int   { p.mu.Lock(); defer p.mu.Unlock(); return p.all[len(p.all)-1] }

func TestRestartsUntilStopped(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	var started pids
	p := Start(Spec{Name: "flaky", Argv: sh("echo run >> " + runs + "; echo out; exit 3"), Log: filepath.Join(dir, "log"),
		Policy: quick, OnStart: started.add})
	eventually(t, "three runs", func() bool { return len(lines(t, runs)) >= 3 })
	p.Stop()
	n := len(lines(t, runs))
	time.Sleep(200 * time.Millisecond)
	if got := len(lines(t, runs)); got != n {
		t.Errorf("%d runs after Stop returned, want none", got-n)
	}
	if started.n() < n {
		t.Errorf("OnStart called %d times for %d runs", started.n(), n)
	}
	if out := lines(t, filepath.Join(dir, "log")); len(out) < n || out[0] != "out" {
		t.Errorf("log %q, want a line per run", out)
	}
}

func TestStop(t *testing.T) {
	tests := []struct {
		name   string
		script string
		grace  time.Duration
		want   string // what the process wrote on its way out
	}{
		{"SIGTERM ends it", `trap 'echo term >> $OUT; exit 0' TERM; while :; do sleep 0.05; done`, 10 * time.Second, "term"},
		{"SIGKILL after the grace period", `trap '' TERM; echo up >> $OUT; while :; do sleep 0.05; done`, 300 * time.Millisecond, "up"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			var started pids
			p := Start(Spec{Name: "svc", Argv: sh("OUT=" + out + "; " + tc.script), Log: filepath.Join(dir, "log"),
				Policy: quick, Grace: tc.grace, OnStart: started.add})
			eventually(t, "a start", func() bool { return started.n() > 0 })
			time.Sleep(100 * time.Millisecond) // the trap is set
			begin := time.Now()
			p.Stop()
			if took := time.Since(begin); took > tc.grace+5*time.Second {
				t.Errorf("Stop took %s", took)
			}
			if alive(started.last()) {
				t.Errorf("pid %d still runs after Stop", started.last())
			}
			if got := lines(t, out); len(got) == 0 || got[0] != tc.want {
				t.Errorf("the process wrote %q, want %q", got, tc.want)
			}
			if started.n() != 1 {
				t.Errorf("%d starts, want 1", started.n())
			}
		})
	}
}

// Stop during the back-off after a run returns at once and starts nothing.
func TestStopWhileBackingOff(t *testing.T) {
	dir := t.TempDir()
	var started pids
	p := Start(Spec{Name: "short", Argv: sh("exit 1"), Log: filepath.Join(dir, "log"),
		Policy: restart.Policy{Initial: time.Hour, Max: time.Hour, ResetAfter: time.Hour}, OnStart: started.add})
	eventually(t, "the first run", func() bool { return started.n() == 1 })
	time.Sleep(100 * time.Millisecond)
	done := make(chan struct{})
	go func() { p.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop waited for the back-off")
	}
	if started.n() != 1 {
		t.Errorf("%d starts, want 1", started.n())
	}
}

// TestAdopt: a detached process left running by an earlier supervisor is
// found by its pid file and command line, never by a pid alone; it is
// watched instead of started again, replaced once it exits, and stopped
// by Stop.
func TestAdopt(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	start := func(t *testing.T, argv []string) *exec.Cmd {
		cmd := exec.Command(argv[0], argv[1:]...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = cmd.Wait() }()
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		// Start returns once the exec is past its point of no return,
		// which can be before the new program's command line is in
		// place: an adopting supervisor only meets one that has run a
		// while.
		cmdline := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline"
		eventually(t, "the command line", func() bool { b, _ := os.ReadFile(cmdline); return len(b) > 0 })
		return cmd
	}
	tests := []struct {
		name     string
		recorded []string // the command line of the process the pid file names
		adopted  bool
	}{
		{"same command line", []string{sleep, "30"}, true},
		{"another command line (a reused pid)", []string{sleep, "31"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			old := start(t, tc.recorded)
			pidFile := filepath.Join(dir, "daemon.pid")
			if err := os.WriteFile(pidFile, []byte(strconv.Itoa(old.Process.Pid)), 0o644); err != nil {
				t.Fatal(err)
			}
			var started pids
			p := Start(Spec{Name: "daemon", Argv: []string{sleep, "30"}, Log: filepath.Join(dir, "log"), Detach: true,
				PidFile: pidFile, Policy: quick, OnStart: started.add})
			t.Cleanup(p.Stop)
			if !tc.adopted {
				eventually(t, "a start of its own", func() bool { return started.n() == 1 })
				return
			}
			time.Sleep(300 * time.Millisecond)
			if started.n() != 0 {
				t.Fatalf("started %d processes while the adopted one runs", started.n())
			}
			_ = old.Process.Kill()
			eventually(t, "a start after the adopted one exited", func() bool { return started.n() == 1 })
			if b, _ := os.ReadFile(pidFile); string(b) != strconv.Itoa(started.last()) {
				t.Errorf("pid file %q, want the new run's %d", b, started.last())
			}
			p.Stop()
			if alive(started.last()) {
				t.Error("the run after the adopted one still runs after Stop")
			}
		})
	}
}

// An adopted process is stopped by Stop too.
func TestStopAdopted(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	argv := []string{sleep, "30"}
	old := exec.Command(argv[0], argv[1:]...)
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = old.Wait(); close(exited) }()
	t.Cleanup(func() { _ = old.Process.Kill() })
	cmdline := "/proc/" + strconv.Itoa(old.Process.Pid) + "/cmdline"
	eventually(t, "the command line", func() bool { b, _ := os.ReadFile(cmdline); return len(b) > 0 })
	pidFile := filepath.Join(dir, "daemon.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(old.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	var started pids
	p := Start(Spec{Name: "daemon", Argv: argv, Log: filepath.Join(dir, "log"), Detach: true, PidFile: pidFile,
		Policy: quick, OnStart: started.add})
	time.Sleep(300 * time.Millisecond)
	p.Stop()
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatal("the adopted process was not stopped")
	}
	if started.n() != 0 {
		t.Errorf("%d starts, want none", started.n())
	}
}
