package runtime

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// layerSize bounds a container's writable layer (a tmpfs: it lives as
// long as the container's mount namespace, like a container's layer
// lives as long as the container).
const layerSize = "512m"

// oldRoot is where the machine's root waits during pivot_root.
const oldRoot = ".svcnet-old-root"

// enterOwnRoot gives the calling process (in a private mount namespace)
// a root filesystem of its own: the machine's root filesystem under a
// copy-on-write layer, with the machine's other filesystems (/proc, /sys,
// /dev …) mounted where they are. What the container writes to / stays in
// its layer — the machine's files never change — and mount targets can be
// made anywhere, as in an image. scratch is an existing directory the
// layer is mounted on (hidden from the machine: the namespace is private).
//
// The machine's root stays reachable (under /.svcnet-old-root) until
// leave is called: mounts from sources opened before (by /proc/self/fd)
// must be made while it is, since a detached mount cannot be bound.
func enterOwnRoot(scratch string) (leave func() error, err error) {
	// Read before anything is mounted here: the layer's own mounts are
	// not the machine's.
	subs, err := topMounts("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	if strings.ContainsAny(scratch, ",:\\") {
		return nil, fmt.Errorf("layer directory %q: overlay options cannot name it", scratch)
	}
	l, err := mountLayer(scratch)
	if err != nil {
		return nil, err
	}
	opts := "lowerdir=/,upperdir=" + l.upper + ",workdir=" + l.work
	if err := unix.Mount("overlay", l.root, "overlay", 0, opts); err != nil {
		return nil, fmt.Errorf("container root (overlay of the machine's root): %w", err)
	}
	for _, m := range subs {
		if strings.HasPrefix(m, filepath.Clean(scratch)+"/") {
			continue // hidden by the layer mounted on scratch (the pod's namespace files)
		}
		target := filepath.Join(l.root, m)
		if _, err := os.Lstat(target); err != nil {
			continue // a mount point the root filesystem does not show (under another mount)
		}
		if err := unix.Mount(m, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return nil, fmt.Errorf("show %s in the container: %w", m, err)
		}
	}
	return pivotInto(l.root)
}

// layerDirs are the directories of a container's writable layer, on the
// tmpfs that holds it: overlayfs's upper and work directories, and where
// the container's root is mounted.
type layerDirs struct{ upper, work, root string }

// mountLayer mounts the container's writable layer, a tmpfs, on scratch
// and makes its directories.
func mountLayer(scratch string) (layerDirs, error) {
	if err := unix.Mount("tmpfs", scratch, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size="+layerSize); err != nil {
		return layerDirs{}, fmt.Errorf("container layer: %w", err)
	}
	l := layerDirs{filepath.Join(scratch, "upper"), filepath.Join(scratch, "work"), filepath.Join(scratch, "root")}
	for _, d := range []string{l.upper, l.work, l.root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return layerDirs{}, err
		}
	}
	return l, nil
}

// pivotInto makes root (a mount point) the process's root, the old one
// waiting under /.svcnet-old-root until leave is called.
func pivotInto(root string) (leave func() error, err error) {
	if err := os.Mkdir(filepath.Join(root, oldRoot), 0o700); err != nil {
		return nil, err
	}
	if err := unix.PivotRoot(root, filepath.Join(root, oldRoot)); err != nil {
		return nil, fmt.Errorf("pivot_root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return nil, err
	}
	return func() error {
		if err := unix.Unmount("/"+oldRoot, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("leave the machine's root: %w", err)
		}
		return os.Remove("/" + oldRoot)
	}, nil
}

// topMounts lists the mount points mounted directly on the root mount (the
// topmost one at "/"), in mount order: bound recursively, they bring
// every other mount with them.
func topMounts(mountinfo string) ([]string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	type entry struct {
		id, parent int
		point      string
	}
	var all []entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// id parent major:minor root mount-point options …
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		id, err1 := strconv.Atoi(fields[0])
		parent, err2 := strconv.Atoi(fields[1])
		if err1 != nil || err2 != nil {
			continue
		}
		all = append(all, entry{id, parent, unescapeMount(fields[4])})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	rootID := -1
	for _, e := range all {
		if e.point == "/" {
			rootID = e.id // the last one stacked on / is what / shows
		}
	}
	if rootID < 0 {
		return nil, fmt.Errorf("%s shows no root mount", mountinfo)
	}
	var out []string
	for _, e := range all {
		if e.parent == rootID && e.point != "/" {
			out = append(out, e.point)
		}
	}
	return out, nil
}

// unescapeMount decodes the octal escapes (\040 for a space …) of a
// mountinfo path.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// LayerUsage is how many bytes the container whose process is pid has
// written to its own root: its copy-on-write layer (an overlay reports
// the space of its upper layer, the container's tmpfs) and its private
// /tmp and /run, which in an image's container are part of the layer
// (/dev/shm is memory, as in Kubernetes). ok is false for a process
// without a root of its own (or gone).
func LayerUsage(pid int) (used int64, ok bool) {
	root := fmt.Sprintf("/proc/%d/root", pid)
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil || st.Type != unix.OVERLAYFS_SUPER_MAGIC {
		return 0, false
	}
	used = int64(st.Blocks-st.Bfree) * st.Bsize
	for _, dir := range []string{"/tmp", "/run"} {
		if err := unix.Statfs(root+dir, &st); err == nil && st.Type == unix.TMPFS_MAGIC {
			used += int64(st.Blocks-st.Bfree) * st.Bsize
		}
	}
	return used, true
}
