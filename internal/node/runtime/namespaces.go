package runtime

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Process isolation as Kubernetes gives it:
//
//   - each container has a PID namespace of its own, in which its
//     command is process 1 (PIDOwn), unless the pod shares one among its
//     containers (shareProcessNamespace: the pod's, held by its pod-init
//     process) or uses the node's (hostPID);
//   - the containers of a pod share one IPC and one UTS namespace, the
//     pod's, which outlive its containers' restarts as the pause
//     container's do: files in the pod's directory hold them (bind
//     mounts of nsfs, as `ip netns` holds network namespaces), so no
//     process is needed for them;
//   - a process run in a running container (kubectl exec, probes, hooks)
//     enters all of that container's namespaces.
//
// A PID namespace is entered only by a new process, so a process
// joining one (a container of a pod that shares one, an exec) is started
// twice: pod-exec enters the namespace and runs itself again there,
// staying as the relay that waits for it and passes its exit code on.

// PIDOwn asks for a PID namespace of the container's own (ExecOptions.PID).
const PIDOwn = "own"

// Files of a pod's namespaces, in the directory NewPodNamespaces makes,
// and ShmDir, the pod's shared memory (its containers' /dev/shm).
const (
	IPCFile = "ipc"
	UTSFile = "uts"
	ShmDir  = "shm"
)

// shmSource names the tmpfs of a pod's shared memory in the mount table
// (its source), for ReleaseNamespaces to tell it from the pod's others.
const shmSource = "svcnet-pod-shm"

// NewPodNamespaces makes the UTS namespace (holding hostname) and, unless
// hostIPC, the IPC namespace a pod's containers share, held by files in
// dir, and their shared memory: a tmpfs of 64 MiB at dir/ShmDir, which
// each container sees as /dev/shm (as the pod sandbox's in Kubernetes:
// POSIX shared memory goes with the IPC namespace). What is already held
// there is kept (a restarted agent).
func NewPodNamespaces(dir, hostname string, hostIPC bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if !hostIPC {
		if err := mountShm(filepath.Join(dir, ShmDir)); err != nil {
			return err
		}
	}
	want := map[string]int{UTSFile: unix.CLONE_NEWUTS}
	if !hostIPC {
		want[IPCFile] = unix.CLONE_NEWIPC
	}
	flags := 0
	for name, flag := range want {
		if !isNamespaceFile(filepath.Join(dir, name)) {
			flags |= flag
		}
	}
	if flags == 0 {
		return nil
	}
	// unshare changes only the calling thread, which is then thrown
	// away: it stays locked, and exits with its goroutine.
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- func() error {
			if err := unix.Unshare(flags); err != nil {
				return fmt.Errorf("new pod namespaces: %w", err)
			}
			if flags&unix.CLONE_NEWUTS != 0 {
				if err := unix.Sethostname([]byte(hostname)); err != nil {
					return fmt.Errorf("set the pod's hostname: %w", err)
				}
			}
			for name, flag := range want {
				if flags&flag == 0 {
					continue
				}
				if err := holdNamespace(filepath.Join(dir, name), "/proc/thread-self/ns/"+name); err != nil {
					return err
				}
			}
			return nil
		}()
	}()
	return <-errc
}

// mountShm mounts a pod's shared memory at dir, unless it is there.
func mountShm(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var st, parent unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return err
	}
	if err := unix.Stat(filepath.Dir(dir), &parent); err != nil {
		return err
	}
	if st.Dev != parent.Dev {
		return nil // mounted by an earlier run
	}
	if err := unix.Mount(shmSource, dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777,size=64m"); err != nil {
		return fmt.Errorf("the pod's shared memory at %s: %w", dir, err)
	}
	return nil
}

// holdNamespace binds the namespace file src on target, a new file.
func holdNamespace(target, src string) error {
	_ = unix.Unmount(target, unix.MNT_DETACH)
	f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o444)
	if err != nil {
		return err
	}
	f.Close()
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("hold the pod's namespace at %s: %w", target, err)
	}
	return nil
}

// isNamespaceFile reports whether path holds a namespace.
func isNamespaceFile(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}

// ReleaseNamespaces lets go of every namespace held by a file under dir
// (a pod's directory, a node's, a cluster's) and of the pods' shared
// memory there, so that dir can be removed; the namespaces end with their
// last process, the memory with its last container.
func ReleaseNamespaces(dir string) error {
	points, err := nsfsMounts("/proc/self/mountinfo", dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("release namespace %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// nsfsMounts lists the nsfs mount points at or under dir, and those of
// pods' shared memory.
func nsfsMounts(mountinfo, dir string) ([]string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// id parent major:minor root mount-point options … - fstype …
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields := strings.Fields(pre)
		if !ok || len(fields) < 5 || !strings.HasPrefix(post, "nsfs ") && !strings.HasPrefix(post, "tmpfs "+shmSource+" ") {
			continue
		}
		p := unescapeMount(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out, sc.Err()
}

// namespaces are the files of the namespaces a process enters, by kind
// (ipc, uts, pid); PID may also be PIDOwn or "" (the node's).
type namespaces struct{ ipc, uts, pid string }

// namespaces: with Join, the running container's; else the options'.
func (o ExecOptions) namespaces() namespaces {
	if o.Join != 0 {
		p := func(kind string) string { return fmt.Sprintf("/proc/%d/ns/%s", o.Join, kind) }
		return namespaces{ipc: p("ipc"), uts: p("uts"), pid: p("pid")}
	}
	return namespaces{ipc: o.IPC, uts: o.UTS, pid: o.PID}
}

// inNamespace reports whether the calling thread is in the namespace
// held by file (of kind ipc, uts, pid; for pid, the one its children
// are born into, which is the process's own until it changes).
func inNamespace(file, kind string) bool {
	var a, b unix.Stat_t
	if unix.Stat(file, &a) != nil || unix.Stat("/proc/thread-self/ns/"+kind, &b) != nil {
		return false
	}
	return a.Ino == b.Ino && a.Dev == b.Dev
}

// enterNamespace moves the calling (locked) thread into the namespace
// held by file.
func enterNamespace(file, kind string, nstype int) error {
	fd, err := unix.Open(file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the pod's %s namespace: %w", kind, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, nstype); err != nil {
		return fmt.Errorf("enter the pod's %s namespace: %w", kind, err)
	}
	return nil
}

// ownPIDNamespace reports whether the process lives in a PID namespace
// below the one the mounted /proc shows (the machine's), which then
// shows processes it must not see: /proc/self/status numbers the
// process in each namespace from /proc's down to its own.
func ownPIDNamespace() bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if ids, ok := strings.CutPrefix(line, "NSpid:"); ok {
			return len(strings.Fields(ids)) > 1
		}
	}
	return false
}

// relayInto starts this pod-exec again inside the PID namespace held by
// file, and ends with its exit code: it never returns but on failure.
// The new process shares the relay's process group, session and
// terminal, so what signals the group (a stop, a timeout, a terminal's
// ^C) reaches it without the relay passing anything on; it dies with
// the relay (Exec's parent-death signal).
func relayInto(file string) error {
	// Signals for the group are the child's to act on: caught here and
	// dropped, not ignored, since an ignored signal would stay ignored
	// in the child and the command it becomes.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS}
	if err := joinPIDNamespaceForChildren(cmd, file); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start in the PID namespace: %w", err)
	}
	err := cmd.Wait()
	os.Exit(exitCode(cmd, err))
	return nil
}

// joinPIDNamespaceForChildren makes cmd start in the PID namespace held
// by file: the calling goroutine's thread enters it for its children and
// stays locked to the goroutine for good (it must call cmd.Start, and
// the thread must live as long as the child: the child's parent-death
// signal is the thread's). Go's own parent-death check cannot work
// across the namespace (see relayInto): Exec sets the signal itself.
func joinPIDNamespaceForChildren(cmd *exec.Cmd, file string) error {
	runtime.LockOSThread()
	if err := enterNamespace(file, "pid", unix.CLONE_NEWPID); err != nil {
		return err
	}
	if cmd.SysProcAttr != nil {
		cmd.SysProcAttr.Pdeathsig = 0
	}
	return nil
}

// PodInit is the process that holds a pod's shared PID namespace, as
// the pause container does: process 1 there, it reaps the processes
// orphaned to it, and ends on SIGTERM or SIGINT.
func PodInit() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

// PIDNamespaceOf is the file of the PID namespace process pid lives in
// (a pod-init's, for the pod's containers to join).
func PIDNamespaceOf(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/ns/pid" }
