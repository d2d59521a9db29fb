package imagestore

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The writers of each kind of entry. Each works in its parent directory,
// dfd, which openDir opened beneath the layer's root, on a single name
// component, base, that it never follows.

// create runs mk, first removing what an earlier entry of the layer put
// at the name, as a later entry for the same path replaces it.
func (u *unpacker) create(dfd int, base string, mk func() error) error {
	err := mk()
	if !errors.Is(err, unix.EEXIST) {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := u.removeDir(dfd, base); err != nil {
			return err
		}
	} else if err := unix.Unlinkat(dfd, base, 0); err != nil {
		return err
	}
	return mk()
}

// removeDir removes a directory with its content, through an os.Root at
// the parent so that it cannot reach out of the layer.
func (u *unpacker) removeDir(dfd int, base string) error {
	sub, err := os.OpenRoot("/proc/self/fd/" + strconv.Itoa(dfd))
	if err != nil {
		return err
	}
	defer sub.Close()
	return sub.RemoveAll(base)
}

func (u *unpacker) dir(dfd int, name, base string, hdr *tar.Header) error {
	if base != "." {
		err := unix.Mkdirat(dfd, base, 0o700)
		if errors.Is(err, unix.EEXIST) {
			var st unix.Stat_t
			if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return err
			}
			// A directory stays, with what is in it; anything else is
			// replaced.
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				err = u.create(dfd, base, func() error { return unix.Mkdirat(dfd, base, 0o700) })
			} else {
				err = nil
			}
		}
		if err != nil {
			return err
		}
	}
	if err := u.chown(dfd, base, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	if err := u.xattrs(dfd, base, hdr); err != nil {
		return err
	}
	u.dirs = append(u.dirs, dirMeta{name: name, mode: tarMode(hdr), atime: hdr.AccessTime, mtime: hdr.ModTime})
	return nil
}

func (u *unpacker) file(dfd int, base string, hdr *tar.Header, r io.Reader) error {
	var fd int
	err := u.create(dfd, base, func() (err error) {
		fd, err = unix.Openat(dfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		return err
	})
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	return u.meta(dfd, base, hdr, true)
}

func (u *unpacker) hardlink(dfd int, base string, hdr *tar.Header) error {
	tfd, _, tbase, err := u.openParent(hdr.Linkname)
	if err != nil {
		return err
	}
	defer unix.Close(tfd)
	// linkat without AT_SYMLINK_FOLLOW links the entry itself, never what
	// a symlink there points at.
	err = u.create(dfd, base, func() error { return unix.Linkat(tfd, tbase, dfd, base, 0) })
	if errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("hard link to %q, which the layer does not hold before it", hdr.Linkname)
	}
	return err
}

// node makes a device or a FIFO. Devices need CAP_MKNOD: unprivileged,
// they are left out, as rootless runtimes do.
func (u *unpacker) node(dfd int, base string, hdr *tar.Header) error {
	mode := tarMode(hdr)
	switch hdr.Typeflag {
	case tar.TypeChar:
		mode |= unix.S_IFCHR
	case tar.TypeBlock:
		mode |= unix.S_IFBLK
	case tar.TypeFifo:
		mode |= unix.S_IFIFO
	}
	if hdr.Typeflag != tar.TypeFifo && !u.privileged {
		return nil
	}
	dev := int(unix.Mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor)))
	if err := u.create(dfd, base, func() error { return unix.Mknodat(dfd, base, mode, dev) }); err != nil {
		return err
	}
	return u.meta(dfd, base, hdr, true)
}

// meta sets a non-directory's owner, mode (not a symlink's: Linux has
// none), xattrs and times, in that order: chown clears setuid bits, so
// the mode comes after it.
func (u *unpacker) meta(dfd int, base string, hdr *tar.Header, chmod bool) error {
	if err := u.chown(dfd, base, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	if chmod {
		if err := unix.Fchmodat(dfd, base, tarMode(hdr), 0); err != nil {
			return err
		}
	}
	if err := u.xattrs(dfd, base, hdr); err != nil {
		return err
	}
	return setTimes(dfd, base, hdr.AccessTime, hdr.ModTime)
}

func (u *unpacker) chown(dfd int, base string, uid, gid int) error {
	if !u.privileged {
		return nil
	}
	return unix.Fchownat(dfd, base, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
}

// xattrs sets the entry's extended attributes (PAX SCHILY.xattr.*).
// Unprivileged, the trusted and security namespaces are out of reach and
// left out.
func (u *unpacker) xattrs(dfd int, base string, hdr *tar.Header) error {
	for k, v := range hdr.PAXRecords {
		attr, ok := strings.CutPrefix(k, paxXattrPrefix)
		if !ok || strings.HasPrefix(attr, overlayXattrPrefix) {
			continue
		}
		if !u.privileged && (strings.HasPrefix(attr, "trusted.") || strings.HasPrefix(attr, "security.")) {
			continue
		}
		// lsetxattr through the directory's /proc link: the last
		// component is not followed, and base is a single component.
		p := "/proc/self/fd/" + strconv.Itoa(dfd) + "/" + base
		if err := unix.Lsetxattr(p, attr, []byte(v), 0); err != nil {
			return fmt.Errorf("xattr %s: %w", attr, err)
		}
	}
	return nil
}

// finishDirs sets the directories' modes and times, in reverse order so
// that a child's come before its parent's. A directory listed twice gets
// its last entry's.
func (u *unpacker) finishDirs() error {
	done := make(map[string]bool, len(u.dirs))
	for i := len(u.dirs) - 1; i >= 0; i-- {
		d := u.dirs[i]
		if done[d.name] {
			continue
		}
		done[d.name] = true
		parent, base := path.Split(d.name)
		if parent == "" {
			parent = "."
		}
		dfd, err := u.openDir(parent)
		if err != nil {
			return err
		}
		err = unix.Fchmodat(dfd, base, d.mode, 0)
		if err == nil {
			err = setTimes(dfd, base, d.atime, d.mtime)
		}
		unix.Close(dfd)
		if err != nil {
			return fmt.Errorf("directory %q: %w", d.name, err)
		}
	}
	return nil
}

// tarMode is the entry's permission bits with setuid, setgid and sticky.
func tarMode(hdr *tar.Header) uint32 {
	return uint32(hdr.Mode) & 0o7777
}

// setTimes sets an entry's times without following a symlink; an unset
// access time is the modification time.
func setTimes(dfd int, base string, atime, mtime time.Time) error {
	if atime.IsZero() {
		atime = mtime
	}
	ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	return unix.UtimesNanoAt(dfd, base, ts, unix.AT_SYMLINK_NOFOLLOW)
}
