package imagestore

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The OCI layer's whiteout names, and their overlayfs forms.
const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
	opaqueXattr    = "trusted.overlay.opaque"
	// xattrs in this namespace steer overlayfs itself (opaque, redirect,
	// metacopy…); a layer's own are dropped so that what a layer hides
	// is only what its whiteouts say.
	overlayXattrPrefix = "trusted.overlay."
	paxXattrPrefix     = "SCHILY.xattr."
)

// unpacker writes one layer's tar stream into a directory in the form
// overlayfs takes as a lower directory.
//
// Safety: every entry is written relative to a directory file descriptor
// opened with openat2(RESOLVE_BENEATH) from the layer's root, and the
// entry's last component is never followed (O_NOFOLLOW, *at calls with
// AT_SYMLINK_NOFOLLOW). A parent path that leaves the root, by ".." or
// through a symlink (absolute or relative) the layer made earlier, fails
// with EXDEV and the unpack with ErrUnsafePath: nothing is ever written
// outside the root.
type unpacker struct {
	rootFD     int
	privileged bool
	dirs       []dirMeta
}

// dirMeta is set on a directory after the whole layer is written: its
// entries' creation would change its mtime, and a read-only mode would
// stop an unprivileged unpacker writing into it.
type dirMeta struct {
	name  string
	mode  uint32
	atime time.Time
	mtime time.Time
}

// unpack writes the tar stream into dir, which it creates.
func unpack(r io.Reader, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	u := &unpacker{rootFD: fd, privileged: os.Geteuid() == 0}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := u.entry(hdr, tr); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
	return u.finishDirs()
}

// cleanName makes an entry's name relative to the root: "." for the root
// itself. A leading "/" is dropped, as tar does; a name that climbs out
// of the root is refused.
func cleanName(name string) (string, error) {
	c := path.Clean(strings.TrimLeft(name, "/"))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%w: %q leaves the layer", ErrUnsafePath, name)
	}
	return c, nil
}

// openDir opens a directory of the layer, beneath the root, creating it
// and its parents (0755, as tar does for parents the archive does not
// list) if missing.
func (u *unpacker) openDir(name string) (int, error) {
	fd, err := u.openBeneath(name)
	if errors.Is(err, unix.ENOENT) {
		if err := u.mkdirAll(name); err != nil {
			return -1, err
		}
		fd, err = u.openBeneath(name)
	}
	return fd, err
}

// openBeneath opens a directory by a path resolved beneath the root:
// ".." or a symlink leading out of it is EXDEV, reported as ErrUnsafePath.
func (u *unpacker) openBeneath(name string) (int, error) {
	fd, err := unix.Openat2(u.rootFD, name, &unix.OpenHow{
		Flags:   unix.O_DIRECTORY | unix.O_RDONLY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case err == nil:
		return fd, nil
	case errors.Is(err, unix.EXDEV):
		return -1, fmt.Errorf("%w: %q resolves outside the layer", ErrUnsafePath, name)
	default:
		return -1, fmt.Errorf("opening %q: %w", name, err)
	}
}

// mkdirAll makes each missing directory of name, one component at a time
// beneath the root.
func (u *unpacker) mkdirAll(name string) error {
	parent := "."
	for _, c := range strings.Split(strings.Trim(name, "/"), "/") {
		fd, err := u.openBeneath(parent)
		if err != nil {
			return err
		}
		err = unix.Mkdirat(fd, c, 0o755)
		unix.Close(fd)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("making %q: %w", path.Join(parent, c), err)
		}
		parent = path.Join(parent, c)
	}
	return nil
}

// openParent opens the directory that a name of the layer (as the tar
// has it) is in, beneath the layer's root, and gives the name cleaned
// and its last element.
func (u *unpacker) openParent(name string) (dfd int, clean, base string, err error) {
	if clean, err = cleanName(name); err != nil {
		return -1, "", "", err
	}
	parent, base := path.Split(clean)
	if parent == "" {
		parent = "."
	}
	dfd, err = u.openDir(parent)
	return dfd, clean, base, err
}

// entry writes one tar entry.
func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	dfd, name, base, err := u.openParent(hdr.Name)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)

	switch {
	case base == opaqueMarker:
		// The directory's content in lower layers is hidden.
		return unix.Fsetxattr(dfd, opaqueXattr, []byte("y"), 0)
	case strings.HasPrefix(base, whiteoutPrefix):
		hidden := strings.TrimPrefix(base, whiteoutPrefix)
		if hidden == "" || hidden == "." || hidden == ".." {
			return fmt.Errorf("%w: whiteout %q", ErrUnsafePath, hdr.Name)
		}
		// overlayfs's whiteout is a 0/0 character device, owned by root.
		if err := u.create(dfd, hidden, func() error {
			return unix.Mknodat(dfd, hidden, unix.S_IFCHR, 0)
		}); err != nil {
			return err
		}
		if err := u.chown(dfd, hidden, 0, 0); err != nil {
			return err
		}
		return setTimes(dfd, hidden, hdr.AccessTime, hdr.ModTime)
	}

	switch hdr.Typeflag {
	case tar.TypeDir:
		return u.dir(dfd, name, base, hdr)
	// archive/tar reports old tools' TypeRegA as TypeReg.
	case tar.TypeReg:
		return u.file(dfd, base, hdr, r)
	case tar.TypeSymlink:
		if err := u.create(dfd, base, func() error { return unix.Symlinkat(hdr.Linkname, dfd, base) }); err != nil {
			return err
		}
		return u.meta(dfd, base, hdr, false)
	case tar.TypeLink:
		return u.hardlink(dfd, base, hdr)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return u.node(dfd, base, hdr)
	case tar.TypeXGlobalHeader:
		return nil
	default:
		return fmt.Errorf("unsupported tar entry type %q", hdr.Typeflag)
	}
}
