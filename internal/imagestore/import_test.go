package imagestore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// TestImportAndReadFile: an imported image is recorded (Get finds it by
// its reference and its ID), shares layers by diffID, and ReadFile shows
// its files as overlayfs stacks them: the topmost layer wins, whiteouts
// and opaque directories hide what is below.
func TestImportAndReadFile(t *testing.T) {
	requireRoot(t)
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	base := tarOf(t,
		tFile("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n", 0o644),
		tFile("etc/group", "root:x:0:\n", 0o644),
		tFile("etc/secret", "gone\n", 0o600),
		tFile("opq/old", "old\n", 0o644),
		tFile("gonedir/file", "x\n", 0o644),
		tSymlink("etc/link", "passwd"),
	)
	top := tarOf(t,
		tFile("etc/passwd", "root:x:0:0:root:/root:/bin/sh\napp:x:1234:2345::/home/app:/bin/sh\n", 0o644),
		tFile("etc/.wh.secret", "", 0o644),
		tFile("opq/.wh..wh..opq", "", 0o644),
		tFile("opq/new", "new\n", 0o644),
		tFile(".wh.gonedir", "", 0o644),
	)
	cfg := Config{Entrypoint: []string{"/bin/app"}, User: "app"}
	layers := func() []io.Reader { return []io.Reader{bytes.NewReader(base), bytes.NewReader(top)} }
	img, err := s.Import(context.Background(), "example.test/app:v1", cfg, layers())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(img.ID, "example.test/app@sha256:") || len(img.Layers) != 2 || img.Layers[1].Dir == "" {
		t.Fatalf("imported image %+v", img)
	}
	for _, ref := range []string{"example.test/app:v1", img.ID} {
		got, err := s.Get(ref)
		if err != nil || got.ID != img.ID || got.Config.User != "app" || got.Layers[0].Dir != img.Layers[0].Dir {
			t.Errorf("Get(%s) = %+v, %v", ref, got, err)
		}
	}
	// The same layers under another name: shared, not unpacked again.
	again, err := s.Import(context.Background(), "example.test/other", Config{}, layers())
	if err != nil {
		t.Fatal(err)
	}
	if again.Layers[0].Dir != img.Layers[0].Dir || again.ID == img.ID {
		t.Errorf("re-import: layers %v vs %v, IDs %s %s", again.Layers, img.Layers, again.ID, img.ID)
	}
	entries, _ := os.ReadDir(s.Root() + "/tmp")
	if len(entries) != 0 {
		t.Errorf("tmp/ keeps %d entries", len(entries))
	}

	for _, tc := range []struct {
		name, want string
		err        error
	}{
		{"/etc/passwd", "app:x:1234", nil},  // the top layer's
		{"etc/group", "root:x:0:", nil},     // only in the base
		{"/etc/secret", "", fs.ErrNotExist}, // whited out
		{"/opq/new", "new", nil},
		{"/opq/old", "", fs.ErrNotExist},      // under an opaque directory
		{"/gonedir/file", "", fs.ErrNotExist}, // its directory whited out
		{"/etc/missing", "", fs.ErrNotExist},  // in no layer
		{"/etc/link", "", fs.ErrInvalid},      // symlinks are not followed
		{"/etc", "", fs.ErrInvalid},           // a directory
		{"/../etc/passwd", "app:x:1234", nil}, // cannot climb out
	} {
		data, err := img.ReadFile(tc.name)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("ReadFile(%s) = %q, %v; want %v", tc.name, data, err, tc.err)
			}
			continue
		}
		if err != nil || !strings.Contains(string(data), tc.want) {
			t.Errorf("ReadFile(%s) = %q, %v; want %q", tc.name, data, err, tc.want)
		}
	}
}
