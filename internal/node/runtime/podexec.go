// Package runtime runs containers as processes: each in its pod's network,
// IPC and UTS (hostname) namespaces, a PID namespace of its own or its
// pod's, and a private mount namespace in which the pod's resolv.conf and
// hosts files cover /etc's and /proc shows its PID namespace's processes
// only. A container of a built-in image sees the machine's
// filesystem read-only under a writable layer of its own, with writable
// /tmp, /run and /dev/shm; one of a pulled image sees only the image's
// layers under such a layer, with /proc, /sys and /dev of its own. It
// runs as the user, with the capabilities, its Security gives.
package runtime

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/node/cgroups"
)

// ExecOptions describe the environment a container process enters.
type ExecOptions struct {
	Netns      string // named network namespace
	Hostname   string
	ResolvConf string // file to show as /etc/resolv.conf
	Hosts      string // file to show as /etc/hosts
	// HostnameFile is the file to show as /etc/hostname.
	HostnameFile string
	Dir          string
	Argv         []string
	// Security confines the process; nil for the node's own helpers.
	Security *Security
	// PID is the process's PID namespace: "" the node's (hostPID, the
	// node's helpers), PIDOwn a new one of its own, or the file of one to
	// join (a pod's shared one).
	PID string
	// IPC and UTS are the files of the namespaces to join (the pod's,
	// NewPodNamespaces'); "" keeps the node's IPC namespace, and gives
	// the process a UTS namespace of its own holding Hostname.
	IPC, UTS string
	// Shm is the directory the process sees as /dev/shm (the pod's
	// shared memory, NewPodNamespaces' ShmDir); "" gives a confined
	// process a private one.
	Shm string
	// Cgroups are the cgroup.procs files of the container's cgroups
	// (package cgroups), which the process joins before its command
	// starts.
	Cgroups []string
	// Join is the pid of a running container whose namespaces the
	// process enters, mounts included (kubectl exec, probes, hooks: they
	// see the container's files, its layer, /tmp and processes), instead
	// of building the container's view again; PID, IPC and UTS are then
	// the container's.
	Join int
}

// Args encodes o as the arguments of `svcnet internal pod-exec`.
func (o ExecOptions) Args() []string {
	args := []string{"internal", "pod-exec", "--netns", o.Netns, "--hostname", o.Hostname,
		"--resolv-conf", o.ResolvConf, "--hosts", o.Hosts, "--dir", o.Dir}
	if o.HostnameFile != "" {
		args = append(args, "--hostname-file", o.HostnameFile)
	}
	if o.Security != nil {
		args = append(args, "--security", o.Security.encode())
	}
	for _, c := range o.Cgroups {
		args = append(args, "--cgroup", c)
	}
	for flag, v := range map[string]string{"--pid": o.PID, "--ipc": o.IPC, "--uts": o.UTS, "--shm": o.Shm} {
		if v != "" {
			args = append(args, flag, v)
		}
	}
	if o.Join != 0 {
		args = append(args, "--join", strconv.Itoa(o.Join))
	}
	return append(append(args, "--"), o.Argv...)
}

// SysProcAttr is what a pod-exec process running o must be started with:
// new mount and UTS namespaces (a Go process cannot unshare them
// itself), a new PID namespace when o asks for one of its own (the
// process is its first), its own process group, and death with its
// parent.
func SysProcAttr(o ExecOptions) *syscall.SysProcAttr {
	flags := unix.CLONE_NEWNS | unix.CLONE_NEWUTS
	if o.PID == PIDOwn && o.Join == 0 {
		flags |= unix.CLONE_NEWPID
	}
	return &syscall.SysProcAttr{
		Cloneflags: uintptr(flags),
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
}

// Exec enters the pod and replaces the process with o.Argv. It returns
// only on failure. It must run in a process started with SysProcAttr.
func Exec(o ExecOptions) error {
	if len(o.Argv) == 0 {
		return errors.New("no command to run")
	}
	// setns applies to the calling thread; exec keeps that thread's
	// namespace for the new program.
	runtime.LockOSThread()
	ns := o.namespaces()
	if ns.pid != "" && ns.pid != PIDOwn && !inNamespace(ns.pid, "pid") {
		return relayInto(ns.pid)
	}
	// Before anything of the container's runs or is allocated: what it
	// uses from here on is counted against its limits.
	procs := o.Cgroups
	if o.Join != 0 && len(procs) == 0 {
		// Into a running container: its groups too.
		procs = cgroups.ProcsOf(o.Join)
	}
	if err := cgroups.Join(procs); err != nil {
		return err
	}
	target, err := vnetns.GetFromPath(netns.Path(o.Netns))
	if err != nil {
		return fmt.Errorf("pod network namespace %s: %w", o.Netns, err)
	}
	if err := vnetns.Set(target); err != nil {
		return fmt.Errorf("enter %s: %w", o.Netns, err)
	}
	for _, n := range []struct {
		file, kind string
		nstype     int
	}{{ns.ipc, "ipc", unix.CLONE_NEWIPC}, {ns.uts, "uts", unix.CLONE_NEWUTS}} {
		if n.file != "" && !inNamespace(n.file, n.kind) {
			if err := enterNamespace(n.file, n.kind, n.nstype); err != nil {
				return err
			}
		}
	}
	// Opened first, as root and in the machine's view: the container's
	// user may not reach the executable's directory, and its private
	// /tmp may hide it (svcnet's own binary, for the built-in images).
	// A program only the container's view has (/agnhost) is looked up
	// there.
	// Not for an image's container: its programs are the image's alone,
	// and a machine's program of the same name must not stand in.
	exe := -1
	imageRoot := o.Security != nil && len(o.Security.Layers) > 0
	if path, err := exec.LookPath(o.Argv[0]); err == nil && !imageRoot {
		if exe, err = unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	switch {
	case o.Join != 0:
		if err := joinMounts(o.Join); err != nil {
			return err
		}
	case o.ResolvConf != "" || o.Hosts != "" || o.HostnameFile != "" || o.Security != nil:
		// Only in the private mount namespace SysProcAttr gives: a
		// process started without it shares its parent's, and must not
		// change it.
		self, err1 := os.Readlink("/proc/self/ns/mnt")
		parent, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", parentPid()))
		if err1 != nil || err2 != nil || self == parent {
			return errors.New("refusing to mount the pod's files: not in a mount namespace of its own")
		}
		if err := setUpMounts(o); err != nil {
			return err
		}
	}
	path, err := exec.LookPath(o.Argv[0])
	if err != nil && exe < 0 {
		return fmt.Errorf("%s: %w", o.Argv[0], err)
	}
	if o.Hostname != "" && ns.uts == "" {
		if err := unix.Sethostname([]byte(o.Hostname)); err != nil {
			return fmt.Errorf("set hostname: %w", err)
		}
	}
	if o.Dir != "" {
		var err error
		if imageRoot {
			// Resolved within the image, whose symlinks are its author's;
			// missing, it is made in the container's layer, as container
			// runtimes make it (not for exec into a running container).
			err = chdirInRoot(o.Dir, o.Join == 0)
		} else {
			err = os.Chdir(o.Dir)
		}
		if err != nil {
			return fmt.Errorf("working directory %s: %w", o.Dir, err)
		}
	}
	if o.Security != nil {
		if err := dropPrivileges(*o.Security); err != nil {
			return err
		}
	}
	// The parent-death signal belongs to the thread the process was
	// started with, and changing the user clears it: set it last.
	parent := os.Getppid()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("parent-death signal: %w", err)
	}
	if os.Getppid() != parent {
		return errors.New("the parent exited before the command started")
	}
	if path != "" {
		err = syscall.Exec(path, o.Argv, os.Environ())
	}
	if exe >= 0 && (path == "" || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOENT)) {
		err = syscall.Exec(fmt.Sprintf("/proc/self/fd/%d", exe), o.Argv, os.Environ())
	}
	return err
}

// joinMounts enters the mount namespace and the root directory of
// process pid (a running container's). The calling thread must be
// locked, and then stops sharing its filesystem attributes with the
// process's other threads, as setns requires; exec keeps them.
func joinMounts(pid int) error {
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/mnt", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the container's mount namespace: %w", err)
	}
	defer unix.Close(fd)
	// setns puts the caller at the namespace's root mount, which is the
	// container's root only when the node's own root is its namespace's
	// (not under a chroot, as in the test VM): take the container's
	// root itself.
	root, err := unix.Open(fmt.Sprintf("/proc/%d/root", pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the container's root: %w", err)
	}
	defer unix.Close(root)
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare filesystem attributes: %w", err)
	}
	if err := unix.Setns(fd, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("enter the container's mount namespace: %w", err)
	}
	if err := unix.Fchdir(root); err != nil {
		return fmt.Errorf("the container's root: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("the container's root: %w", err)
	}
	return os.Chdir("/")
}

// parentPid is the parent's pid as the mounted /proc numbers it (the
// machine's, before a container's own is mounted): getppid says 0 to
// the first process of a PID namespace, whose parent is outside.
func parentPid() int {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return os.Getppid()
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			if pid, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return pid
			}
		}
	}
	return os.Getppid()
}
