package runtime

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// inRoot resolves a path beneath a root directory as if it were "/":
// symlinks, absolute ones included, and ".." stay inside it, and /proc's
// magic links (/proc/1/root …) are refused. An image's paths are resolved
// so, as its symlinks are the image author's.
var inRoot = &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC,
	Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}

// openInRoot opens path (absolute, in the container's terms) beneath
// root as an O_PATH descriptor, making what is missing of it: a
// directory, or with dir false an empty file, its parents directories.
// A path through a dangling symlink is not made (ENOENT): what the
// symlink meant cannot be told, inside the image or out.
func openInRoot(root int, path string, dir bool) (int, error) {
	rel := relInRoot(path)
	fd, err := unix.Openat2(root, rel, inRoot)
	if err == nil || !errors.Is(err, unix.ENOENT) || rel == "." {
		return fd, err
	}
	parent, err := openInRoot(root, filepath.Dir(rel), true)
	if err != nil {
		return -1, err
	}
	defer unix.Close(parent)
	base := filepath.Base(rel)
	if dir {
		err = unix.Mkdirat(parent, base, 0o755)
	} else {
		var f int
		// A dangling symlink fails here (ELOOP) rather than being followed.
		if f, err = unix.Openat(parent, base, unix.O_CREAT|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644); err == nil {
			unix.Close(f)
		}
	}
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, fmt.Errorf("make %s: %w", path, err)
	}
	return unix.Openat2(root, rel, inRoot)
}

// bindInRoot mounts b on its target beneath root, made if missing, with
// b's flags.
func bindInRoot(root int, b bind) error {
	target, err := openInRoot(root, b.target, b.dir)
	if err != nil {
		return fmt.Errorf("mount target %s: %w", b.target, err)
	}
	defer unix.Close(target)
	src, dst := fmt.Sprintf("/proc/self/fd/%d", b.fd), fmt.Sprintf("/proc/self/fd/%d", target)
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("mount over %s: %w", b.target, err)
	}
	// target is what the mount covers: the mount is found by path again.
	mnt, err := unix.Openat2(root, relInRoot(b.target), inRoot)
	if err != nil {
		return fmt.Errorf("mount over %s: %w", b.target, err)
	}
	defer unix.Close(mnt)
	if err := unix.MountSetattr(mnt, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, b.attr()); err != nil {
		return fmt.Errorf("mount flags of %s: %w", b.target, err)
	}
	return nil
}

// chdirInRoot enters dir of the process's root (an image's, after
// pivot_root), resolved as openInRoot does and made if create.
func chdirInRoot(dir string, create bool) error {
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	var fd int
	if create {
		fd, err = openInRoot(root, dir, true)
	} else {
		fd, err = unix.Openat2(root, relInRoot(dir), inRoot)
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fchdir(fd)
}

// relInRoot is path relative to the root it is resolved beneath: "." for
// the root itself.
func relInRoot(path string) string {
	if rel := strings.TrimPrefix(filepath.Clean("/"+path), "/"); rel != "" {
		return rel
	}
	return "."
}
