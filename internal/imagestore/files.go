package imagestore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ReadFile reads a file of the image's root filesystem as the container's
// overlay mount shows it, without mounting: from the topmost layer that
// has it, unless a layer above hides it — a whiteout of the file or of a
// directory on its path, or an opaque directory on its path, which hides
// everything below it in lower layers. For what the runtime must read
// before the container exists: /etc/passwd and /etc/group, to resolve the
// image's user.
//
// Symbolic links are not followed, neither in name nor as the file: such
// a file is reported as an error (fs.ErrInvalid), as is a directory.
// A file no layer shows is fs.ErrNotExist.
func (img *Image) ReadFile(name string) ([]byte, error) {
	rel := strings.TrimPrefix(path.Clean("/"+name), "/")
	if rel == "" {
		return nil, fmt.Errorf("%s: %w", name, fs.ErrInvalid)
	}
	parts := strings.Split(rel, "/")
	for i := len(img.Layers) - 1; i >= 0; i-- {
		dir := img.Layers[i].Dir
		if dir == "" {
			return nil, fmt.Errorf("%s: layer %s has no directory", img.Ref, img.Layers[i].DiffID)
		}
		data, verdict, err := lookInLayer(dir, parts)
		switch verdict {
		case found:
			return data, nil
		case hidden:
			return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
		case failed:
			return nil, fmt.Errorf("%s in %s: %w", name, img.Ref, err)
		}
	}
	return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
}

type layerVerdict int

const (
	absent layerVerdict = iota // not in this layer: look below
	found
	hidden // this layer hides it from the lower ones
	failed
)

// lookInLayer walks the path's components in one layer directory.
func lookInLayer(dir string, parts []string) ([]byte, layerVerdict, error) {
	p := dir
	for k, c := range parts {
		p = filepath.Join(p, c)
		var st unix.Stat_t
		err := unix.Lstat(p, &st)
		if errors.Is(err, unix.ENOENT) {
			return nil, absent, nil
		}
		if err != nil {
			return nil, failed, err
		}
		typ := st.Mode & unix.S_IFMT
		if typ == unix.S_IFCHR && st.Rdev == 0 {
			return nil, hidden, nil // overlayfs's whiteout
		}
		last := k == len(parts)-1
		switch {
		case last && typ == unix.S_IFREG:
			data, err := os.ReadFile(p)
			if err != nil {
				return nil, failed, err
			}
			return data, found, nil
		case last || typ != unix.S_IFDIR:
			return nil, failed, fmt.Errorf("%s is not a regular file: %w", p, fs.ErrInvalid)
		}
		if v, err := getxattr(p, opaqueXattr); err == nil && v == "y" && !last {
			// Nothing below this directory in lower layers shows: if
			// this layer lacks the rest of the path, no layer has it.
			data, verdict, err := lookInLayer(p, parts[k+1:])
			if verdict == absent {
				verdict = hidden
			}
			return data, verdict, err
		}
	}
	return nil, absent, nil
}

func getxattr(p, attr string) (string, error) {
	buf := make([]byte, 16)
	n, err := unix.Lgetxattr(p, attr, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
