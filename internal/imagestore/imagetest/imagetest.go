// Package imagetest builds small container images for tests, without a
// registry or the network: layers as tar streams, a base layer of the
// machine's static busybox, images of such layers for this machine's
// platform or another, and `docker save` archives of them, to import,
// push or load into an imagestore.Store.
package imagetest

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"testing"
	"time"
)

// Entry is one entry of a layer.
type Entry struct {
	Name     string
	Type     byte   // tar.TypeReg, TypeDir, TypeSymlink …
	Body     string // a file's content, a symlink's target
	Mode     int64
	UID, GID int
}

// File is a regular file entry.
func File(name, body string, mode int64) Entry {
	return Entry{Name: name, Type: tar.TypeReg, Body: body, Mode: mode}
}

// Whiteout hides name (a path in the image) from the layers below.
func Whiteout(name string) Entry {
	dir, base := splitPath(name)
	return File(dir+".wh."+base, "", 0o644)
}

// Opaque hides what layers below have in directory dir.
func Opaque(dir string) Entry { return File(dir+"/.wh..wh..opq", "", 0o644) }

func splitPath(name string) (dir, base string) {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name[:i+1], name[i+1:]
		}
	}
	return "", name
}

// Layer writes entries as an uncompressed layer tar stream.
func Layer(t testing.TB, entries ...Entry) io.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Name, Typeflag: e.Type, Mode: e.Mode, Uid: e.UID, Gid: e.GID, ModTime: time.Unix(1700000000, 0)}
		switch e.Type {
		case tar.TypeReg:
			hdr.Size = int64(len(e.Body))
		case tar.TypeSymlink:
			hdr.Linkname = e.Body
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if e.Type == tar.TypeReg {
			if _, err := io.WriteString(tw, e.Body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// Applets are the busybox programs in the Busybox layer's /bin.
var Applets = []string{"sh", "echo", "cat", "ls", "id", "pwd", "readlink", "grep", "head", "wc", "stat", "touch", "printf"}

// Busybox is a base layer: the machine's static busybox (Debian's
// busybox-static, /bin/busybox) with its Applets in /bin, /tmp, and
// extra entries. The test is skipped on a machine without it.
func Busybox(t testing.TB, extra ...Entry) io.Reader {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skip("needs a static /bin/busybox (Debian's busybox-static):", err)
	}
	entries := []Entry{
		{Name: "bin/", Type: tar.TypeDir, Mode: 0o755},
		File("bin/busybox", string(bb), 0o755),
		{Name: "tmp/", Type: tar.TypeDir, Mode: 0o1777},
	}
	for _, a := range Applets {
		entries = append(entries, Entry{Name: "bin/" + a, Type: tar.TypeSymlink, Body: "busybox", Mode: 0o777})
	}
	return Layer(t, append(entries, extra...)...)
}
