package imagestore

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: mknod and trusted xattrs")
	}
}

// withXattr adds a PAX xattr record to the entry.
func withXattr(e tarEntry, name, value string) tarEntry {
	e.hdr.PAXRecords = map[string]string{paxXattrPrefix + name: value}
	return e
}

func owned(e tarEntry, uid, gid int) tarEntry {
	e.hdr.Uid, e.hdr.Gid = uid, gid
	return e
}

// TestUnpackTree unpacks a layer of every entry kind, with whiteouts, and
// checks the tree file by file in the form overlayfs reads.
func TestUnpackTree(t *testing.T) {
	requireRoot(t)
	dir := filepath.Join(t.TempDir(), "fs")
	layer := tarOf(t,
		tDir("./", 0o755),
		tDir("etc/", 0o755),
		owned(tFile("etc/passwd", "root:x:0:0\n", 0o644), 0, 0),
		withXattr(owned(tFile("usr/bin/tool", "#!/bin/sh\n", 0o4755), 1000, 2000), "user.origin", "test"),
		tHardlink("usr/bin/tool2", "usr/bin/tool"),
		tSymlink("bin", "usr/bin"),
		tSymlink("etc/abs", "/etc/passwd"),
		tDir("tmp/", 0o1777),
		tarEntry{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "dev/null", Mode: 0o666, Devmajor: 1, Devminor: 3, ModTime: testMtime}},
		tarEntry{hdr: tar.Header{Typeflag: tar.TypeFifo, Name: "run/fifo", Mode: 0o600, ModTime: testMtime}},
		tFile("etc/.wh.old.conf", "", 0o644),
		tDir("var/cache/", 0o700),
		tFile("var/cache/.wh..wh..opq", "", 0o644),
		tFile("var/cache/fresh", "new\n", 0o644),
		withXattr(tDir("data/", 0o750), "trusted.overlay.redirect", "/elsewhere"),
	)
	if err := unpack(bytes.NewReader(layer), dir); err != nil {
		t.Fatal(err)
	}

	type want struct {
		typ      uint32
		mode     uint32 // permission bits; not checked for symlinks
		uid, gid uint32
		content  string // regular files
		target   string // symlinks
		rdev     uint64
	}
	for _, tc := range []struct {
		path string
		want want
	}{
		{".", want{typ: unix.S_IFDIR, mode: 0o755}},
		{"etc", want{typ: unix.S_IFDIR, mode: 0o755}},
		{"etc/passwd", want{typ: unix.S_IFREG, mode: 0o644, content: "root:x:0:0\n"}},
		{"usr/bin/tool", want{typ: unix.S_IFREG, mode: 0o4755, uid: 1000, gid: 2000, content: "#!/bin/sh\n"}},
		{"usr/bin/tool2", want{typ: unix.S_IFREG, mode: 0o4755, uid: 1000, gid: 2000, content: "#!/bin/sh\n"}},
		{"usr", want{typ: unix.S_IFDIR, mode: 0o755}}, // implied by usr/bin/tool
		{"bin", want{typ: unix.S_IFLNK, target: "usr/bin"}},
		{"etc/abs", want{typ: unix.S_IFLNK, target: "/etc/passwd"}},
		{"tmp", want{typ: unix.S_IFDIR, mode: 0o1777}},
		{"dev/null", want{typ: unix.S_IFCHR, mode: 0o666, rdev: unix.Mkdev(1, 3)}},
		{"run/fifo", want{typ: unix.S_IFIFO, mode: 0o600}},
		{"etc/old.conf", want{typ: unix.S_IFCHR, mode: 0, rdev: 0}}, // overlay whiteout
		{"var/cache", want{typ: unix.S_IFDIR, mode: 0o700}},
		{"var/cache/fresh", want{typ: unix.S_IFREG, mode: 0o644, content: "new\n"}},
		{"data", want{typ: unix.S_IFDIR, mode: 0o750}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			p := filepath.Join(dir, tc.path)
			var st unix.Stat_t
			if err := unix.Lstat(p, &st); err != nil {
				t.Fatal(err)
			}
			if typ := st.Mode & unix.S_IFMT; typ != tc.want.typ {
				t.Fatalf("type %o, want %o", typ, tc.want.typ)
			}
			if tc.want.typ != unix.S_IFLNK && tc.want.typ != unix.S_IFCHR || tc.path == "dev/null" {
				if m := st.Mode & 0o7777; m != tc.want.mode {
					t.Errorf("mode %o, want %o", m, tc.want.mode)
				}
			}
			if st.Uid != tc.want.uid || st.Gid != tc.want.gid {
				t.Errorf("owner %d:%d, want %d:%d", st.Uid, st.Gid, tc.want.uid, tc.want.gid)
			}
			if st.Rdev != tc.want.rdev {
				t.Errorf("rdev %x, want %x", st.Rdev, tc.want.rdev)
			}
			if tc.path != "." && tc.path != "usr" && tc.path != "usr/bin" && st.Mtim.Sec != testMtime.Unix() {
				t.Errorf("mtime %d, want %d", st.Mtim.Sec, testMtime.Unix())
			}
			switch tc.want.typ {
			case unix.S_IFREG:
				if b, err := os.ReadFile(p); err != nil || string(b) != tc.want.content {
					t.Errorf("content %q (%v), want %q", b, err, tc.want.content)
				}
			case unix.S_IFLNK:
				if got, err := os.Readlink(p); err != nil || got != tc.want.target {
					t.Errorf("target %q (%v), want %q", got, err, tc.want.target)
				}
			}
		})
	}

	// The hard link is one file.
	var a, b unix.Stat_t
	if unix.Lstat(filepath.Join(dir, "usr/bin/tool"), &a) != nil || unix.Lstat(filepath.Join(dir, "usr/bin/tool2"), &b) != nil || a.Ino != b.Ino || a.Nlink != 2 {
		t.Errorf("usr/bin/tool2 is not a hard link of usr/bin/tool (inodes %d, %d)", a.Ino, b.Ino)
	}
	xattr := func(path, name string) string {
		buf := make([]byte, 256)
		n, err := unix.Lgetxattr(filepath.Join(dir, path), name, buf)
		if err != nil {
			return "error: " + err.Error()
		}
		return string(buf[:n])
	}
	if got := xattr("var/cache", opaqueXattr); got != "y" {
		t.Errorf("var/cache's %s: %q, want y", opaqueXattr, got)
	}
	if got := xattr("etc", opaqueXattr); got == "y" {
		t.Errorf("etc is opaque")
	}
	if got := xattr("usr/bin/tool", "user.origin"); got != "test" {
		t.Errorf("usr/bin/tool's user.origin: %q", got)
	}
	if got := xattr("data", "trusted.overlay.redirect"); got != "error: "+unix.ENODATA.Error() {
		t.Errorf("the layer's own overlay xattr was kept: %q", got)
	}
	for _, gone := range []string{"etc/.wh.old.conf", "var/cache/.wh..wh..opq"} {
		if _, err := os.Lstat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Errorf("%s is in the tree: %v", gone, err)
		}
	}
}

// TestUnpackRefusesEscapes: entries that would write outside the layer
// fail the unpack, and nothing is written outside.
func TestUnpackRefusesEscapes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries func(outside string) []tarEntry
	}{
		{"dot-dot file", func(string) []tarEntry { return []tarEntry{tFile("../pwned", "x", 0o644)} }},
		{"dot-dot inside a path", func(string) []tarEntry { return []tarEntry{tFile("a/../../pwned", "x", 0o644)} }},
		{"absolute symlink followed", func(outside string) []tarEntry {
			return []tarEntry{tSymlink("link", outside), tFile("link/pwned", "x", 0o644)}
		}},
		{"relative symlink climbing out", func(string) []tarEntry {
			return []tarEntry{tSymlink("up", "../.."), tFile("up/pwned", "x", 0o644)}
		}},
		{"symlink to a dir outside, then a dir in it", func(outside string) []tarEntry {
			return []tarEntry{tSymlink("d", outside), tDir("d/pwned/", 0o755)}
		}},
		{"hard link out", func(string) []tarEntry { return []tarEntry{tHardlink("h", "../../etc/passwd")} }},
		{"hard link through a symlink out", func(outside string) []tarEntry {
			return []tarEntry{tSymlink("o", outside), tHardlink("h", "o/secret")}
		}},
		{"whiteout of dot-dot", func(string) []tarEntry { return []tarEntry{tFile("a/.wh...", "", 0o644)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			if err := os.Mkdir(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(base, "layer", "fs")
			if err := os.Mkdir(filepath.Dir(dir), 0o755); err != nil {
				t.Fatal(err)
			}
			err := unpack(bytes.NewReader(tarOf(t, tc.entries(outside)...)), dir)
			if !errors.Is(err, ErrUnsafePath) {
				t.Fatalf("got %v, want ErrUnsafePath", err)
			}
			t.Logf("refused: %v", err)
			for _, p := range []string{filepath.Join(base, "pwned"), filepath.Join(base, "layer", "pwned"), filepath.Join(outside, "pwned")} {
				if _, err := os.Lstat(p); !os.IsNotExist(err) {
					t.Errorf("%s was written", p)
				}
			}
		})
	}
}

// TestUnpackReplace: a later entry for a path replaces an earlier one of
// another kind, a directory's content included; a directory listed again
// keeps its content.
func TestUnpackReplace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fs")
	layer := tarOf(t,
		tFile("a", "file first", 0o644),
		tDir("a/", 0o755),
		tFile("a/in", "in a\n", 0o644),
		tDir("b/", 0o755),
		tFile("b/child", "x", 0o644),
		tFile("b", "now a file\n", 0o600),
		tDir("c/", 0o755),
		tFile("c/kept", "kept\n", 0o644),
		tDir("c/", 0o700),
		tSymlink("d", "a"),
		tFile("d", "not through the link\n", 0o644),
	)
	if err := unpack(bytes.NewReader(layer), dir); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"a/in": "in a\n", "b": "now a file\n", "c/kept": "kept\n", "d": "not through the link\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, path)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", path, b, err, want)
		}
	}
	if fi, err := os.Lstat(filepath.Join(dir, "c")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("c: %v, %v; want the second entry's mode 0700", fi.Mode(), err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "d")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("d is not a regular file: %v", err)
	}
}
