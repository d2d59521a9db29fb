package runtime

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/syncbuf"
)

// TestMain lets the test binary stand in for svcnet: the shim starts
// `self internal pod-exec …` and the agent `self internal container-shim …`.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "internal" {
		switch os.Args[2] {
		case "container-shim":
			// --state DIR --log FILE [stdio flags] -- pod-exec args…
			o, err := ParseShimArgs(os.Args[3:])
			if err == nil {
				err = RunShim(os.Args[0], o)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			os.Exit(0)
		case "pod-exec":
			o, err := ParseExecArgs(os.Args[3:])
			if err == nil {
				err = Exec(o)
			}
			fmt.Fprintln(os.Stderr, "cannot start:", err)
			os.Exit(128)
		case "pod-init":
			PodInit()
		}
	}
	if len(os.Args) > 1 && os.Args[1] == "confine-check" {
		confineCheck(os.Args[2:])
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testNetns makes a network namespace svcnet-test-WHAT-N for the test,
// removed when it ends.
func testNetns(t *testing.T, what string) string {
	t.Helper()
	ns := fmt.Sprintf("svcnet-test-%s-%d", what, rand.IntN(1e9))
	if err := netns.Create(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Delete(ns) })
	return ns
}

// containerTest prepares a test that starts containers. They enter
// network and mount namespaces, which takes root (CI runs as root): the
// test is skipped without. It returns a network namespace for the test
// and the test binary, which is the containers' entry point too.
func containerTest(t *testing.T, what string) (ns, self string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("containers enter network and mount namespaces: needs root; CI runs as root")
	}
	ns = testNetns(t, what)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return ns, self
}

// TestShimOutlivesAgent: a container started through its shim keeps
// running when the process that started it lets go, is found again by
// its state directory (as a restarted agent finds it), stops on SIGTERM
// with its exit code recorded, and its output is in its log.
func TestShimOutlivesAgent(t *testing.T) {
	ns, self := containerTest(t, "shim")
	dir := t.TempDir()
	start := func(name string, argv ...string) (*Process, string, string) {
		t.Helper()
		state, log := filepath.Join(dir, name+".run"), filepath.Join(dir, name+".log")
		if err := os.MkdirAll(state, 0o700); err != nil {
			t.Fatal(err)
		}
		p, err := Start(self, Spec{Exec: ExecOptions{Netns: ns, Hostname: name, Argv: argv},
			Env: []string{"PATH=" + os.Getenv("PATH")}, Log: log, StateDir: state})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { Kill(state) })
		return p, state, log
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	logHas := func(log, s string) func() bool {
		return func() bool { data, _ := os.ReadFile(log); return strings.Contains(string(data), s) }
	}

	p, state, log := start("server", "sh", "-c", "echo started; trap 'echo term; exit 3' TERM; while :; do sleep 0.1; done")
	until("its output in the log", logHas(log, "stdout F started"))
	// The shim is in a session of its own: not this process's child's
	// session, so the death of the agent does not reach it.
	rec, err := readRecord(state)
	if err != nil {
		t.Fatal(err)
	}
	if sid, _ := unix.Getsid(rec.shim); sid != rec.shim {
		t.Errorf("shim %d is in session %d, not its own", rec.shim, sid)
	}
	again, err := Adopt(state)
	if err != nil || again.Pid() != p.Pid() || !again.Started.Equal(p.Started) {
		t.Fatalf("adopt: %v, pid %d (started %d)", err, again.Pid(), p.Pid())
	}
	select {
	case <-again.Done():
		t.Fatal("an adopted running container reports done")
	default:
	}
	again.Stop(5 * time.Second)
	if again.ExitCode() != 3 {
		t.Errorf("exit code %d, want 3 (its TERM trap)", again.ExitCode())
	}
	<-p.Done() // the first watcher sees the end too
	if p.ExitCode() != 3 {
		t.Errorf("first watcher: exit code %d", p.ExitCode())
	}
	until("the trap's output", logHas(log, "stdout F term"))

	// A killed shim takes its container along, and reads as killed.
	p2, state2, _ := start("victim", "sleep", "300")
	Kill(state2)
	select {
	case <-p2.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a killed container is not seen to end")
	}
	if p2.ExitCode() != 128+int(syscall.SIGKILL) {
		t.Errorf("killed: exit code %d", p2.ExitCode())
	}
	until("the container process to end with its shim", func() bool { return !running(p2.Pid()) })

	// A command that is not there: pod-exec's 128.
	p3, _, _ := start("missing", "no-such-command-svcnet")
	<-p3.Done()
	if p3.ExitCode() != 128 {
		t.Errorf("missing command: exit code %d, want 128", p3.ExitCode())
	}
}

// running reports whether pid is a live process (not a zombie waiting
// for whoever adopted it to reap it).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}

// TestAttach: a container with stdin gets an attached client's input and
// sends it its output; with stdinOnce its stdin ends with the client's;
// with a tty it has a terminal. Attach returns when the container exits.
func TestAttach(t *testing.T) {
	ns, self := containerTest(t, "attach")
	// Each input is sent once the output so far has the line before it:
	// a shell's read may take more than its line from a pipe.
	cases := []struct {
		name   string
		stdio  Stdio
		argv   []string
		inputs []string
		want   []string // output after each input, then at the end
	}{
		{"stdin once", Stdio{Stdin: true, StdinOnce: true},
			[]string{"sh", "-c", `read line; echo "got $line"; cat; echo "done $?" >&2`}, []string{"abc\n", "rest\n"},
			[]string{"got abc\n", "rest\n", "done 0\n"}},
		{"tty", Stdio{Stdin: true, StdinOnce: true, TTY: true},
			[]string{"sh", "-c", `read x; echo "tty:$x"; test -t 0 && echo isatty`}, []string{"abc\n"},
			[]string{"tty:abc", "isatty"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// Deeper than a unix socket address can name (108 bytes), as
			// state directories under a test's temporary one are.
			state, log := filepath.Join(dir, strings.Repeat("a-long-directory-name/", 5), "run"), filepath.Join(dir, "log")
			if err := os.MkdirAll(state, 0o700); err != nil {
				t.Fatal(err)
			}
			p, err := Start(self, Spec{Exec: ExecOptions{Netns: ns, Hostname: fmt.Sprint("attach", i), Argv: tc.argv},
				Env: []string{"PATH=" + os.Getenv("PATH")}, Log: log, StateDir: state, Stdio: tc.stdio})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { Kill(state) })
			var out syncbuf.Buffer
			in, feed := io.Pipe()
			done := make(chan error, 1)
			go func() { done <- Attach(state, AttachStreams{Stdin: in, Stdout: &out, Stderr: &out}) }()
			go func() {
				for j, chunk := range tc.inputs {
					if j > 0 {
						for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), tc.want[j-1]) && time.Now().Before(deadline); {
							time.Sleep(10 * time.Millisecond)
						}
					}
					_, _ = feed.Write([]byte(chunk))
				}
				feed.Close()
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("attach did not end with the container; output so far %q", out.String())
			}
			<-p.Done()
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("attached output %q lacks %q", out.String(), w)
				}
			}
			if p.ExitCode() != 0 {
				t.Errorf("exit code %d", p.ExitCode())
			}
		})
	}
}
