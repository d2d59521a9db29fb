package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestNamespaces: a container sees and signals only the processes of
// its own PID namespace, even those of another pod with the same user;
// the containers of a pod share its IPC and UTS namespaces, which
// another pod's do not; an exec enters all of a running container's
// namespaces; the containers of a pod that shares its PID namespace see
// and signal each other, under its pod-init.
func TestNamespaces(t *testing.T) {
	ns, self := containerTest(t, "pidns")
	dir := t.TempDir()
	t.Cleanup(func() {
		if err := ReleaseNamespaces(dir); err != nil {
			t.Error(err)
		}
	})
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	const user = 201240 // both pods' user, as with the same runAsUser
	type pod struct{ name, dir string }
	newPod := func(name string) pod {
		t.Helper()
		p := pod{name, filepath.Join(dir, name)}
		if err := NewPodNamespaces(filepath.Join(p.dir, "ns"), name, false); err != nil {
			t.Fatal(err)
		}
		return p
	}
	opts := func(p pod, pid string, argv ...string) ExecOptions {
		layer, err := os.MkdirTemp(p.dir, "layer-")
		if err != nil {
			t.Fatal(err)
		}
		return ExecOptions{Netns: ns, Hostname: p.name, PID: pid,
			IPC: filepath.Join(p.dir, "ns", IPCFile), UTS: filepath.Join(p.dir, "ns", UTSFile),
			Security: &Security{ReadOnlyHost: true, UID: user, GID: user, NoNewPrivs: true, RootLayer: layer}, Argv: argv}
	}
	start := func(o ExecOptions, name string) *Process {
		t.Helper()
		state := filepath.Join(dir, name+".run")
		if err := os.MkdirAll(state, 0o700); err != nil {
			t.Fatal(err)
		}
		p, err := Start(self, Spec{Exec: o, Env: env, Log: filepath.Join(dir, name+".log"), StateDir: state})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { Kill(state) })
		return p
	}
	run := func(o ExecOptions) (string, int) {
		t.Helper()
		out, code, err := RunOnce(self, o, env, 10*time.Second)
		if err != nil {
			t.Fatalf("%q: %v: %s", o.Argv, err, out)
		}
		return string(out), code
	}
	nsID := func(file string) string {
		var st unix.Stat_t
		if err := unix.Stat(file, &st); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(st.Ino)
	}

	a, b := newPod("pod-a"), newPod("pod-b")
	sleeper := start(opts(b, PIDOwn, "sh", "-c", "exec sleep 300"), "b-sleeper")
	waitCmdline(t, sleeper.Pid(), "sleep")

	// A container of pod A, the same user.
	script := fmt.Sprintf(`echo pid $$; echo host $(hostname); echo procs /proc/[0-9]*
kill -0 %d 2>/dev/null && echo signal yes || echo signal no
echo ipc $(stat -L -c %%i /proc/self/ns/ipc)`, sleeper.Pid())
	out, code := run(opts(a, PIDOwn, "sh", "-c", script))
	want := fmt.Sprintf("pid 1\nhost pod-a\nprocs /proc/1\nsignal no\nipc %s\n", nsID(filepath.Join(a.dir, "ns", IPCFile)))
	if code != 0 || out != want {
		t.Errorf("a container of another pod, same user:\n%s(exit %d)\nwant\n%s", out, code, want)
	}
	// An exec into pod B's running container: its processes, hostname
	// and IPC namespace, the pod's.
	join := opts(b, "", "sh", "-c", `echo pid $$; echo host $(hostname); echo init $(tr '\0' ' ' </proc/1/cmdline)
echo ipc $(stat -L -c %i /proc/self/ns/ipc) $(stat -L -c %i /proc/1/ns/ipc)`)
	join.Join = sleeper.Pid()
	out, code = run(join)
	bIPC := nsID(filepath.Join(b.dir, "ns", IPCFile))
	if !strings.Contains(out, "host pod-b\ninit sleep 300\nipc "+bIPC+" "+bIPC+"\n") || strings.HasPrefix(out, "pid 1\n") || code != 0 {
		t.Errorf("exec into pod B's container:\n%s(exit %d)\nwant its hostname, its process 1 (sleep 300) and pod B's IPC namespace %s", out, code, bIPC)
	}
	if bIPC == nsID(filepath.Join(a.dir, "ns", IPCFile)) {
		t.Error("two pods share an IPC namespace")
	}

	// A pod sharing its PID namespace: its containers join its pod-init's.
	c := newPod("pod-c")
	init := start(ExecOptions{Netns: ns, PID: PIDOwn, IPC: filepath.Join(c.dir, "ns", IPCFile),
		UTS: filepath.Join(c.dir, "ns", UTSFile), Argv: []string{self, "internal", "pod-init"}}, "c-init")
	waitCmdline(t, init.Pid(), "pod-init")
	shared := PIDNamespaceOf(init.Pid())
	worker := start(opts(c, shared, "sh", "-c", "exec sleep 301"), "c-worker")
	waitCmdline(t, worker.Pid(), "sleep")
	out, code = run(opts(c, shared, "sh", "-c", `echo init $(tr '\0' ' ' </proc/1/cmdline)
ign=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/self/status); [ $((0x$ign & 0x4007)) = 0 ] || echo HUP, INT, QUIT or TERM ignored: $ign
for p in /proc/[0-9]*; do if [ "$(tr '\0' ' ' <$p/cmdline 2>/dev/null)" = "sleep 301 " ]; then kill -0 ${p#/proc/} && echo signal yes; fi; done
exit 7`))
	if want := fmt.Sprintf("init %s internal pod-init\nsignal yes\n", self); out != want || code != 7 {
		t.Errorf("a container of a pod sharing its PID namespace:\n%s(exit %d)\nwant\n%s(exit 7, passed on by the relay)", out, code, want)
	}
	// Its pod-init ends on SIGTERM, and every process of the pod with it.
	if err := unix.Kill(init.Pid(), unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Process{init, worker} {
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("process %d outlived the pod's init", p.Pid())
		}
	}
	if code := worker.ExitCode(); code != 128+int(unix.SIGKILL) {
		t.Errorf("the pod's container exited %d when its pod-init ended; want %d (killed)", code, 128+int(unix.SIGKILL))
	}
}

// waitCmdline waits until process pid runs a command line containing
// what (a container past its pod-exec).
func waitCmdline(t *testing.T, pid int, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(b), what) && !strings.Contains(string(b), "pod-exec") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d never ran %s: %q", pid, what, b)
		}
	}
}

// TestNamespaceFiles: a pod's namespaces are made once, kept across
// calls (a restarted agent), and released; nsfsMounts finds only what
// is under a directory.
func TestNamespaceFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("namespaces take root; CI runs as root")
	}
	for _, hostIPC := range []bool{true, false} {
		t.Run(fmt.Sprintf("hostIPC=%v", hostIPC), func(t *testing.T) {
			dir := t.TempDir()
			nsDir := filepath.Join(dir, "pod", "ns")
			if err := NewPodNamespaces(nsDir, "web-0", hostIPC); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ReleaseNamespaces(dir) })
			uts, ipc, shm := filepath.Join(nsDir, UTSFile), filepath.Join(nsDir, IPCFile), filepath.Join(nsDir, ShmDir)
			if !isNamespaceFile(uts) {
				t.Fatal("no UTS namespace held")
			}
			want := []string{uts}
			if hostIPC {
				for _, f := range []string{ipc, shm} {
					if _, err := os.Stat(f); err == nil {
						t.Errorf("%s for a hostIPC pod", f)
					}
				}
			} else {
				if !isNamespaceFile(ipc) {
					t.Error("no IPC namespace held")
				}
				var st unix.Statfs_t
				fi, err := os.Stat(shm)
				if err != nil || unix.Statfs(shm, &st) != nil || st.Type != unix.TMPFS_MAGIC || fi.Mode().Perm()|fi.Mode()&os.ModeSticky != 0o777|os.ModeSticky {
					t.Fatalf("the pod's shared memory: %v %v, type %#x, want a tmpfs of mode 1777", fi, err, st.Type)
				}
				if err := os.WriteFile(filepath.Join(shm, "seg"), []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
				want = []string{ipc, shm, uts}
			}
			var before unix.Stat_t
			_ = unix.Stat(uts, &before)
			if err := NewPodNamespaces(nsDir, "web-0", hostIPC); err != nil {
				t.Fatal(err)
			}
			var after unix.Stat_t
			_ = unix.Stat(uts, &after)
			if before.Ino != after.Ino {
				t.Error("a second call replaced the pod's UTS namespace")
			}
			if _, err := os.Stat(filepath.Join(shm, "seg")); !hostIPC && err != nil {
				t.Errorf("a second call replaced the pod's shared memory: %v", err)
			}
			points, err := nsfsMounts("/proc/self/mountinfo", filepath.Join(dir, "pod"))
			slices.Sort(points)
			if err != nil || !slices.Equal(points, want) {
				t.Errorf("mounts held under the pod: %q %v, want %q", points, err, want)
			}
			if points, _ := nsfsMounts("/proc/self/mountinfo", dir+"-other"); len(points) != 0 {
				t.Errorf("mounts held under another directory: %q", points)
			}
			if err := ReleaseNamespaces(dir); err != nil {
				t.Fatal(err)
			}
			if isNamespaceFile(uts) || isNamespaceFile(ipc) {
				t.Error("a namespace is still held")
			}
			if err := os.RemoveAll(dir); err != nil {
				t.Errorf("remove the pod's directory once released: %v", err)
			}
		})
	}
}
