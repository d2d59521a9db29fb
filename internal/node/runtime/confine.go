package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// setUpMounts builds the container's view of the filesystem in its
// private mount namespace: its own root (Security.RootLayer: the
// machine's under a layer, or with Security.Layers an image's), the
// pod's files over /etc's and, when confined over the machine's root,
// the machine's filesystems read-only under private writable places,
// with the container's volumes on top.
func setUpMounts(o ExecOptions) error {
	// Nothing below may propagate to the machine's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// Asked before a /proc of the container's own hides the machine's.
	ownPIDs := ownPIDNamespace()
	var binds []bind
	defer func() {
		for _, b := range binds {
			unix.Close(b.fd)
		}
	}()
	// Sources are opened first: the private /tmp or /run may hide them
	// (a pod's directory under the machine's /tmp, say).
	open := func(src, target string, readOnly bool) error {
		fd, err := unix.Open(src, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("mount source %s: %w", src, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return err
		}
		binds = append(binds, bind{fd, target, readOnly, st.Mode&unix.S_IFMT == unix.S_IFDIR})
		return nil
	}
	for src, dst := range map[string]string{o.ResolvConf: "/etc/resolv.conf", o.Hosts: "/etc/hosts", o.HostnameFile: "/etc/hostname"} {
		if src != "" {
			if err := open(src, dst, o.Security != nil && o.Security.ReadOnlyHost); err != nil {
				return err
			}
		}
	}
	if o.Shm != "" {
		if err := open(o.Shm, "/dev/shm", false); err != nil {
			return err
		}
	}
	sec := o.Security
	if sec != nil {
		for _, m := range sec.Mounts {
			if err := open(m.Source, m.Target, m.ReadOnly); err != nil {
				return err
			}
		}
	}
	ownRoot := sec != nil && sec.RootLayer != ""
	if sec != nil && len(sec.Layers) > 0 {
		if !ownRoot {
			return errors.New("image layers without a directory for the container's layer")
		}
		// An image's root shows nothing of the machine's filesystems to
		// make read-only, and has its own /tmp, /run (in its layer) and
		// /dev/shm. Its files are the image's, not the machine's: every
		// mount is made inside it before the machine's root is left.
		return enterImageRoot(sec.RootLayer, sec.Layers, sec.ReadOnlyHost, func(root int) error {
			if sec.OwnsRoot {
				// In the layer only: the layers never change.
				if err := unix.Fchownat(root, "", int(sec.UID), int(sec.GID), unix.AT_EMPTY_PATH); err != nil {
					return fmt.Errorf("give the container's user its root directory: %w", err)
				}
			}
			for _, b := range binds {
				if err := bindInRoot(root, b); err != nil {
					return err
				}
			}
			return nil
		})
	}
	leave := func() error { return nil }
	if ownRoot {
		var err error
		if leave, err = enterOwnRoot(sec.RootLayer); err != nil {
			return err
		}
		if sec.OwnsRoot {
			// In the layer only: the machine's / never changes.
			if err := os.Chown("/", int(sec.UID), int(sec.GID)); err != nil {
				return fmt.Errorf("give the container's user its root directory: %w", err)
			}
		}
	}
	if sec != nil && sec.ReadOnlyHost {
		attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, attr); err != nil {
			return fmt.Errorf("make the machine's filesystem read-only: %w", err)
		}
		if ownRoot {
			// The container's own layer is writable; the machine's
			// filesystems under it are not.
			attr := &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
			if err := unix.MountSetattr(unix.AT_FDCWD, "/", 0, attr); err != nil {
				return fmt.Errorf("make the container's layer writable: %w", err)
			}
		}
		for _, dir := range Private {
			if _, err := os.Stat(dir); err != nil {
				continue
			}
			mode := "1777"
			if dir == "/run" {
				mode = "0755"
			}
			if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode="+mode+",size=64m"); err != nil {
				return fmt.Errorf("private %s: %w", dir, err)
			}
		}
	}
	if ownPIDs {
		// The machine's /proc would show every process of the machine.
		if err := mountProc("/proc", sec != nil && sec.ReadOnlyHost); err != nil {
			return err
		}
	}
	for _, b := range binds {
		if err := makeTarget(b.target, b.dir, sec != nil && sec.ReadOnlyHost && !ownRoot); err != nil {
			return err
		}
		src := fmt.Sprintf("/proc/self/fd/%d", b.fd)
		if err := unix.Mount(src, b.target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("mount over %s: %w", b.target, err)
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, b.target, unix.AT_RECURSIVE, b.attr()); err != nil {
			return fmt.Errorf("mount flags of %s: %w", b.target, err)
		}
	}
	return leave()
}

// bind is a mount of a file or directory of the machine's into the
// container, its source opened before the container's root is entered.
type bind struct {
	fd       int
	target   string
	readOnly bool
	dir      bool
}

// attr is the bind mount's flags: it keeps its source's unless set.
func (b bind) attr() *unix.MountAttr {
	if b.readOnly {
		return &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	}
	return &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
}

// makeTarget makes sure a mount target exists. Under a confined
// container's private places it is created; elsewhere the machine's
// filesystem is read-only and the target must already be there.
func makeTarget(target string, dir, confined bool) error {
	if _, err := os.Stat(target); err == nil {
		return nil
	}
	// /var/run/secrets/… is under /run: judge where the path really leads.
	target = resolveExisting(target)
	private := false
	for _, p := range Private {
		if target == p || strings.HasPrefix(target, p+"/") {
			private = true
		}
	}
	if confined && !private {
		return fmt.Errorf("mount target %s does not exist, and the machine's filesystem is read-only to the container: mount under %s",
			target, strings.Join(Private, ", "))
	}
	if dir {
		return os.MkdirAll(target, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// resolveExisting resolves the symbolic links of the longest part of p
// that exists, and appends the rest.
func resolveExisting(p string) string {
	rest := ""
	for dir := filepath.Clean(p); ; dir = filepath.Dir(dir) {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest)
		}
		if dir == "/" || dir == "." {
			return p
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// dropPrivileges makes the calling thread (which then execs) the
// container's user with exactly sec.Caps: out of the bounding set for
// good, ambient so that they survive exec as a non-root user.
func dropPrivileges(sec Security) error {
	var have [2]unix.CapUserData
	if err := unix.Capget(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &have[0]); err != nil {
		return fmt.Errorf("capabilities: %w", err)
	}
	all := len(sec.Caps) == len(capNames)
	keep := map[int]bool{}
	for _, c := range sec.Caps {
		n, ok := CapNumber(c)
		if !ok {
			return fmt.Errorf("unknown capability %q", c)
		}
		if have[n/32].Permitted&(1<<(n%32)) == 0 {
			if all {
				continue // privileged: every capability the node has
			}
			return fmt.Errorf("capability %s is not available on this node", c)
		}
		keep[n] = true
	}
	for n := 0; n <= unix.CAP_LAST_CAP; n++ {
		if !keep[n] {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(n), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("drop %s: %w", capNames[n], err)
			}
		}
	}
	groups := make([]int, len(sec.Groups))
	for i, g := range sec.Groups {
		groups[i] = int(g)
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("supplementary groups: %w", err)
	}
	if err := unix.Setresgid(int(sec.GID), int(sec.GID), int(sec.GID)); err != nil {
		return fmt.Errorf("group %d: %w", sec.GID, err)
	}
	// Keep the permitted set across the user change, to pick from it.
	if err := unix.Prctl(unix.PR_SET_KEEPCAPS, 1, 0, 0, 0); err != nil {
		return err
	}
	if err := unix.Setresuid(int(sec.UID), int(sec.UID), int(sec.UID)); err != nil {
		return fmt.Errorf("user %d: %w", sec.UID, err)
	}
	var data [2]unix.CapUserData
	for n := range keep {
		data[n/32].Effective |= 1 << (n % 32)
		data[n/32].Permitted |= 1 << (n % 32)
		data[n/32].Inheritable |= 1 << (n % 32)
	}
	if err := unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0]); err != nil {
		return fmt.Errorf("capabilities: %w", err)
	}
	for n := range keep {
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, uintptr(n), 0, 0); err != nil {
			return fmt.Errorf("ambient %s: %w", capNames[n], err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_KEEPCAPS, 0, 0, 0, 0); err != nil {
		return err
	}
	// Changing the user made the process undumpable, which closes
	// /proc/self/fd to it; exec resets this anyway.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		return err
	}
	if sec.NoNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no_new_privs: %w", err)
		}
	}
	return nil
}
