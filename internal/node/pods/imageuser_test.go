package pods

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/imagestore"
	"github.com/svcnet/svcnet/internal/imagestore/imagetest"
)

// importImage imports an image of layers into a store of the test's.
func importImage(t *testing.T, store *imagestore.Store, ref string, cfg imagestore.Config, layers ...io.Reader) *imagestore.Image {
	t.Helper()
	img, err := store.Import(context.Background(), ref, cfg, layers)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func testStore(t *testing.T) *imagestore.Store {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("unpacking image layers (whiteouts, owners) needs root; CI runs as root")
	}
	store, err := imagestore.Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// TestImageUser: an image's user resolved against its own passwd and
// group files as its container sees them (the top layer's, a whiteout
// honoured), by containerd's rules.
func TestImageUser(t *testing.T) {
	store := testStore(t)
	layers := func() []io.Reader {
		return []io.Reader{imagetest.Layer(t, imagetest.File("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nold:x:999:999::/:/bin/sh\n", 0o644),
			imagetest.File("etc/group", "root:x:0:app\nstaff:x:50:\nwheel:x:10:other,app\naudio:x:29:app\n", 0o644)),
			imagetest.Layer(t, imagetest.File("etc/passwd", "root:x:0:0:root:/root:/bin/sh\napp:x:1234:2345:app:/home/app:/bin/sh\n", 0o644))}
	}
	cases := []struct {
		user     string
		uid, gid int64
		groups   []int64
		wantErr  string
	}{
		{user: "app", uid: 1234, gid: 2345, groups: []int64{0, 10, 29}},
		{user: "1234", uid: 1234, gid: 2345, groups: []int64{0, 10, 29}}, // its group and name from the passwd
		{user: "4000", uid: 4000, gid: 0},                                // not listed: group 0, no memberships
		{user: "app:staff", uid: 1234, gid: 50, groups: []int64{0, 10, 29}},
		{user: "app:77", uid: 1234, gid: 77, groups: []int64{0, 10, 29}},
		{user: "4000:4001", uid: 4000, gid: 4001},
		{user: "old", wantErr: "unable to find user old"}, // the top layer's passwd wins
		{user: "nobody", wantErr: "unable to find user nobody"},
		{user: "app:nogroup", wantErr: "unable to find group nogroup"},
	}
	for _, tc := range cases {
		t.Run(tc.user, func(t *testing.T) {
			img := importImage(t, store, "svcnet.test/user:"+strings.NewReplacer(":", "-").Replace(tc.user), imagestore.Config{User: tc.user}, layers()...)
			u, err := imageUser(img)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%+v, %v; want an error with %q", u, err, tc.wantErr)
				}
				return
			}
			if err != nil || u.UID != tc.uid || u.GID != tc.gid || u.Spec != tc.user || !slices.Equal(u.Groups, tc.groups) {
				t.Errorf("%+v, %v; want %d:%d with groups %v", u, err, tc.uid, tc.gid, tc.groups)
			}
			if home := imageHome(img, tc.uid); tc.uid == 1234 && home != "/home/app" || tc.uid == 4000 && home != "/" {
				t.Errorf("home of %d: %q", tc.uid, home)
			}
		})
	}
	// A whited-out passwd: no users but numbers.
	img := importImage(t, store, "svcnet.test/user:gone", imagestore.Config{User: "app"},
		append(layers(), imagetest.Layer(t, imagetest.Whiteout("etc/passwd")))...)
	if u, err := imageUser(img); err == nil {
		t.Errorf("user app with its passwd whited out: %+v", u)
	}
	img = importImage(t, store, "svcnet.test/user:none", imagestore.Config{}, layers()...)
	if u, err := imageUser(img); u != nil || err != nil {
		t.Errorf("no user: %+v, %v", u, err)
	}
}
