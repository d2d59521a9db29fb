package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// maxLayers is overlayfs's limit on lower directories (OVL_MAX_STACK).
const maxLayers = 500

// linksDir holds, on the container's layer, a short symlink per image
// layer ("l/0" bottom …): overlay's options must fit in a page, and an
// image store's layer paths are a hundred bytes each.
const linksDir = "l"

// enterImageRoot gives the calling process (in a private mount
// namespace) an image's root filesystem: layers (bottom first) as
// overlayfs lower directories under a copy-on-write layer, a tmpfs
// mounted on scratch (as enterOwnRoot's, it lives as long as the mount
// namespace, and the layer directories never change), with /proc, /sys
// (read-only) and a minimal /dev of its own, as a container runtime sets
// them up. Nothing of the machine's filesystems shows but those.
// confined makes the kernel's settings under /proc read-only.
//
// mountInside makes the container's other mounts, given the new root (an
// O_PATH descriptor), before pivot_root; the machine's root is unmounted
// right after. The image is not the machine's: its symlinks may point
// anywhere, /.svcnet-old-root and /proc/1/root included, so nothing may
// be resolved in it by path while the machine's root is reachable or
// /proc is mounted — only beneath root (bindInRoot, openInRoot).
func enterImageRoot(scratch string, layers []string, confined bool, mountInside func(root int) error) error {
	if len(layers) == 0 || len(layers) > maxLayers {
		return fmt.Errorf("an image root takes 1 to %d layers, not %d", maxLayers, len(layers))
	}
	l, err := mountLayer(scratch)
	if err != nil {
		return err
	}
	opts, err := linkLayers(scratch, layers)
	if err != nil {
		return err
	}
	// The options name the layers relative to scratch, so the mount is
	// made from there; nothing else runs in this process meanwhile, and
	// pivotInto moves to the new root.
	if err := os.Chdir(scratch); err != nil {
		return err
	}
	if err := unix.Mount("overlay", l.root, "overlay", 0, opts); err != nil {
		return fmt.Errorf("container root (overlay of %d image layers): %w", len(layers), err)
	}
	if err := mountKernelFS(l.root, confined); err != nil {
		return err
	}
	if err := mountDev(l.root); err != nil {
		return err
	}
	root, err := unix.Open(l.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	err = mountInside(root)
	unix.Close(root)
	if err != nil {
		return err
	}
	leave, err := pivotInto(l.root)
	if err != nil {
		return err
	}
	return leave()
}

// topDir makes sure name (/proc, /sys, /dev) is a directory of the
// image's root, not a symlink leading elsewhere, and returns its path.
func topDir(root, name string) (string, error) {
	p := filepath.Join(root, name)
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return p, os.Mkdir(p, 0o755)
	case err != nil:
		return "", err
	case !fi.IsDir():
		return "", fmt.Errorf("the image's /%s is not a directory (%s)", name, fi.Mode().Type())
	}
	return p, nil
}

// linkLayers makes scratch/l/N point to layers[N] and returns the overlay
// options naming them relative to scratch: the topmost lower directory
// first, as overlayfs wants them. With 500 layers they take under 3 KB.
func linkLayers(scratch string, layers []string) (string, error) {
	if err := os.Mkdir(filepath.Join(scratch, linksDir), 0o700); err != nil {
		return "", err
	}
	lower := make([]string, len(layers))
	for i, dir := range layers {
		if !filepath.IsAbs(dir) {
			return "", fmt.Errorf("image layer %q: not an absolute path", dir)
		}
		name := filepath.Join(linksDir, strconv.Itoa(i))
		if err := os.Symlink(dir, filepath.Join(scratch, name)); err != nil {
			return "", err
		}
		lower[len(layers)-1-i] = name
	}
	opts := "lowerdir=" + strings.Join(lower, ":") + ",upperdir=upper,workdir=work"
	if len(opts) >= os.Getpagesize() {
		return "", fmt.Errorf("overlay options for %d layers take %d bytes, more than a page", len(layers), len(opts))
	}
	return opts, nil
}

// mountKernelFS mounts /proc and /sys (read-only) in root: new instances,
// which show the process's own PID namespace and its pod's network
// devices, or the machine's bound where the kernel refuses a new one.
func mountKernelFS(root string, confined bool) error {
	target, err := topDir(root, "sys")
	if err != nil {
		return err
	}
	const noexec = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	err = unix.Mount("sysfs", target, "sysfs", noexec|unix.MS_RDONLY, "")
	if errors.Is(err, unix.EPERM) {
		err = bindReadOnly("/sys", target, true)
	}
	if err != nil {
		return fmt.Errorf("/sys in the container: %w", err)
	}
	if target, err = topDir(root, "proc"); err != nil {
		return err
	}
	return mountProc(target, confined)
}

// Kernel settings a confined container reads but does not change, as
// container runtimes mount them (a non-root user cannot write them
// anyway; this holds for capabilities added too).
var readOnlyProc = []string{"bus", "fs", "irq", "sys", "sysrq-trigger"}

// mountProc mounts a new /proc on target (a directory the container's
// own, not resolved through an image's symlinks), which shows the
// processes of the caller's PID namespace; confined makes the kernel's
// settings in it read-only. Where the kernel refuses a new instance, the
// machine's is bound.
func mountProc(target string, confined bool) error {
	err := unix.Mount("proc", target, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	if errors.Is(err, unix.EPERM) {
		err = bindReadOnly("/proc", target, false)
	}
	if err != nil {
		return fmt.Errorf("/proc in the container: %w", err)
	}
	if !confined {
		return nil
	}
	// A new proc: its own entries, no image symlinks among them.
	for _, p := range readOnlyProc {
		dir := filepath.Join(target, p)
		if _, err := os.Lstat(dir); err != nil {
			continue
		}
		if err := bindReadOnly(dir, dir, true); err != nil {
			return fmt.Errorf("/proc/%s read-only: %w", p, err)
		}
	}
	for _, p := range maskedProc {
		if err := mask(filepath.Join(target, p)); err != nil {
			return fmt.Errorf("mask /proc/%s: %w", p, err)
		}
	}
	return nil
}

// The kernel's files a confined container does not see at all, as
// container runtimes mask them (runc's default masked paths): memory,
// keys and timing details of the machine.
var maskedProc = []string{"acpi", "asound", "interrupts", "kcore", "keys", "latency_stats",
	"sched_debug", "scsi", "timer_list", "timer_stats"}

// mask hides path: an empty read-only tmpfs over a directory, /dev/null
// over a file; a path the kernel does not have needs nothing.
func mask(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil
	}
	if fi.IsDir() {
		return unix.Mount("tmpfs", path, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0")
	}
	return unix.Mount("/dev/null", path, "", unix.MS_BIND, "")
}

// bindReadOnly binds src (recursively) on target, read-only if asked.
func bindReadOnly(src, target string, readOnly bool) error {
	if err := unix.Mount(src, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if !readOnly {
		return nil
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	return unix.MountSetattr(unix.AT_FDCWD, target, unix.AT_RECURSIVE, attr)
}

// The machine's devices a container gets, bound from its /dev; the
// others are absent, as in a container runtime's default /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// mountDev gives root a /dev of its own: a small tmpfs with the devices
// above, the usual symlinks, a devpts instance of its own and a /dev/shm.
// /dev/mqueue shows the message queues of the IPC namespace, the pod's.
func mountDev(root string) error {
	dev, err := topDir(root, "dev")
	if err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_STRICTATIME, "mode=755,size=65536k"); err != nil {
		return fmt.Errorf("/dev in the container: %w", err)
	}
	for _, d := range devices {
		target := filepath.Join(dev, d)
		if err := os.WriteFile(target, nil, 0o644); err != nil {
			return err
		}
		// The bind keeps the machine's /dev mount flags (dev, not nodev).
		if err := unix.Mount("/dev/"+d, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("/dev/%s in the container: %w", d, err)
		}
	}
	for name, target := range map[string]string{
		"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
		"stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx",
	} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	for _, m := range []struct {
		dir, fstype, opts string
		flags             uintptr
	}{
		// gid 5 is tty's in the usual images, as runc assumes.
		{"pts", "devpts", "newinstance,ptmxmode=0666,mode=0620,gid=5", unix.MS_NOSUID | unix.MS_NOEXEC},
		{"shm", "tmpfs", "mode=1777,size=64m", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
		{"mqueue", "mqueue", "", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
	} {
		target := filepath.Join(dev, m.dir)
		if err := os.Mkdir(target, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.fstype, target, m.fstype, m.flags, m.opts); err != nil {
			return fmt.Errorf("/dev/%s in the container: %w", m.dir, err)
		}
	}
	return nil
}
