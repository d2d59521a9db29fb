package runtime

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/imagestore"
	"github.com/svcnet/svcnet/internal/imagestore/imagetest"
)

// busyboxBase is a base layer: busybox, an /etc/passwd naming app
// (1234, group 2345), a file and a directory the next layer hides.
func busyboxBase(t *testing.T) io.Reader {
	return imagetest.Busybox(t,
		imagetest.File("etc/passwd", "root:x:0:0:root:/root:/bin/sh\napp:x:1234:2345:app:/home/app:/bin/sh\n", 0o644),
		imagetest.File("etc/group", "root:x:0:\napp:x:2345:\n", 0o644),
		imagetest.File("etc/secret", "the machine's?\n", 0o644),
		imagetest.File("opq/old", "old\n", 0o644),
		imagetest.Entry{Name: "home/app/", Type: tar.TypeDir, Mode: 0o755, UID: 1234, GID: 2345},
	)
}

// testImage imports an image of the busybox base, a layer that whites
// out /etc/secret and makes /opq opaque, and then enough small layers to
// make n in all, each writing /data/N and /data/top.
func testImage(t *testing.T, n int) *imagestore.Image {
	t.Helper()
	store, err := imagestore.Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	layers := []io.Reader{busyboxBase(t), imagetest.Layer(t,
		imagetest.Whiteout("etc/secret"),
		imagetest.Opaque("opq"),
		imagetest.File("opq/new", "new\n", 0o644),
	)}
	for i := len(layers); i < n; i++ {
		layers = append(layers, imagetest.Layer(t, imagetest.File(fmt.Sprintf("data/%d", i), "", 0o644), imagetest.File("data/top", fmt.Sprint(i), 0o644)))
	}
	img, err := store.Import(context.Background(), "svcnet.test/busybox:layers", imagestore.Config{}, layers)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func imageLayerDirs(img *imagestore.Image) []string {
	var dirs []string
	for _, l := range img.Layers {
		dirs = append(dirs, l.Dir)
	}
	return dirs
}

// TestImageRoot runs a container over an image of 40 layers (their
// paths alone would overflow overlay's options): it sees the image's
// files and not the machine's, as the layers stack (a whiteout, an opaque
// directory, the top layer's file), writes to its root without changing
// the layers, has /proc, a read-only /sys and a /dev of its own, the
// pod's resolv.conf and hosts, and runs as its user in its working
// directory, made since the image lacks it.
func TestImageRoot(t *testing.T) {
	_, self := containerTest(t, "imageroot")
	const nLayers = 40
	img := testImage(t, nLayers)
	dir := t.TempDir()
	podDir, state, log := filepath.Join(dir, "pod"), filepath.Join(dir, "c.run"), filepath.Join(dir, "c.log")
	resolv, hosts := filepath.Join(dir, "resolv.conf"), filepath.Join(dir, "hosts")
	for d, content := range map[string]string{resolv: "nameserver 10.96.0.10\nsearch svcnet.test\n", hosts: "10.1.2.3\tpod-a\n"} {
		if err := os.WriteFile(d, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{podDir, state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := `
id -u; id -g; pwd
test -e /etc/debian_version && echo machine-root
test -e /etc/secret && echo secret-shows
ls /opq
cat /data/top; echo
echo written > /rootfile && cat /rootfile
echo mine > /tmp/mine && cat /tmp/mine
stat -f -c 'proc:%T' /proc
test -d /proc/$$ && echo own-proc
test -s /proc/timer_list || echo timer_list-masked
grep -q ' /sys ro,' /proc/self/mountinfo && echo sys-ro
ls /dev | while read d; do printf 'dev:%s ' "$d"; done; echo
echo x > /dev/null && head -c 5 /dev/urandom | wc -c
cat /etc/resolv.conf /etc/hosts
ls -a / | grep -q svcnet-old-root && echo old-root-shows
echo "env:$FOO"
`
	p, err := Start(self, Spec{
		Exec: ExecOptions{Netns: fmt.Sprintf("/proc/%d/ns/net", os.Getpid()), Hostname: "imageroot",
			ResolvConf: resolv, Hosts: hosts, Dir: "/work/dir", Argv: []string{"/bin/sh", "-c", script},
			Security: &Security{ReadOnlyHost: true, UID: 1234, GID: 2345, NoNewPrivs: true,
				RootLayer: podDir, OwnsRoot: true, Layers: imageLayerDirs(img)}},
		Env: []string{"PATH=/bin", "FOO=bar"}, Log: log, StateDir: state,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Kill(state) })
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the container did not end")
	}
	out := logText(t, log)
	if p.ExitCode() != 0 {
		t.Fatalf("exit code %d; output:\n%s\nshim: %s", p.ExitCode(), out, readFile(filepath.Join(state, "shim.log")))
	}
	want := []string{
		"1234\n2345\n/work/dir\n",
		"\nnew\n",
		fmt.Sprintf("\n%d\n", nLayers-1),
		"written\n", "mine\n",
		"proc:proc\n", "own-proc\n", "timer_list-masked\n", "sys-ro\n",
		"dev:fd dev:full dev:mqueue dev:null dev:ptmx dev:pts dev:random dev:shm dev:stderr dev:stdin dev:stdout dev:tty dev:urandom dev:zero \n",
		"\n5\n",
		"nameserver 10.96.0.10\nsearch svcnet.test\n10.1.2.3\tpod-a\n",
		"env:bar\n",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	for _, bad := range []string{"machine-root", "secret-shows", "old\n", "old-root-shows"} {
		if strings.Contains(out, bad) {
			t.Errorf("output has %q:\n%s", bad, out)
		}
	}
	// The layers are as unpacked: the container wrote to its own layer.
	base := img.Layers[0].Dir
	for _, f := range []string{"rootfile", "tmp/mine", "work"} {
		if _, err := os.Lstat(filepath.Join(base, f)); err == nil {
			t.Errorf("the container wrote %s into the image's base layer", f)
		}
	}
	if data, err := os.ReadFile(filepath.Join(base, "etc/secret")); err != nil || string(data) != "the machine's?\n" {
		t.Errorf("the base layer's etc/secret: %q, %v", data, err)
	}
	entries, _ := os.ReadDir(podDir)
	if len(entries) != 0 {
		t.Errorf("the container's layer shows in the pod directory on the machine: %v", entries)
	}
}

// TestLinkLayers: overlay's options name 500 layers of long paths within
// a page, topmost first, each link leading to its layer.
func TestLinkLayers(t *testing.T) {
	scratch := t.TempDir()
	var layers []string
	for i := range maxLayers {
		layers = append(layers, fmt.Sprintf("/var/lib/svcnet/images/layers/sha256/%064d/fs", i))
	}
	opts, err := linkLayers(scratch, layers)
	if err != nil {
		t.Fatal(err)
	}
	lower := strings.Split(strings.TrimPrefix(strings.Split(opts, ",")[0], "lowerdir="), ":")
	if len(lower) != maxLayers || lower[0] != "l/499" || lower[maxLayers-1] != "l/0" {
		t.Fatalf("lowerdir has %d entries, from %s to %s", len(lower), lower[0], lower[len(lower)-1])
	}
	if target, err := os.Readlink(filepath.Join(scratch, "l/7")); err != nil || target != layers[7] {
		t.Errorf("l/7 leads to %q, %v", target, err)
	}
	if _, err := linkLayers(t.TempDir(), []string{"relative/fs"}); err == nil {
		t.Error("a relative layer path was taken")
	}
	if !slices.Contains(strings.Split(opts, ","), "upperdir=upper") {
		t.Errorf("options %q", opts[len(opts)-40:])
	}
}

func logText(t *testing.T, log string) string {
	t.Helper()
	var b strings.Builder
	for line := range strings.SplitSeq(readFile(log), "\n") {
		// "<time> <stream> F <text>"
		if f := strings.SplitN(line, " ", 4); len(f) == 4 {
			b.WriteString(f[3] + "\n")
		}
	}
	return b.String()
}

func readFile(p string) string {
	data, _ := os.ReadFile(p)
	return string(data)
}

// TestImageRootEscapes: an image's symlinks lead nowhere outside it while
// its container is set up as root — not through the machine's old root
// (/.svcnet-old-root), /proc's magic links or "..": resolved inside the
// image, they dangle or are refused, and the start fails, the machine's
// directory they aim at empty. A symlink within the image is followed.
func TestImageRootEscapes(t *testing.T) {
	_, self := containerTest(t, "escapes")
	outside := t.TempDir() // on the machine: nothing may appear here
	store, err := imagestore.Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	link := func(name, target string) imagetest.Entry {
		return imagetest.Entry{Name: name, Type: tar.TypeSymlink, Body: target, Mode: 0o777}
	}
	img, err := store.Import(context.Background(), "svcnet.test/escapes:v1", imagestore.Config{}, []io.Reader{
		imagetest.Busybox(t, link("old", "/"+oldRoot+outside), link("magic", "/proc/1/root"+outside),
			link("rel", "../../../../../../.."+outside), link("abs", "/tmp")),
	})
	if err != nil {
		t.Fatal(err)
	}
	source := filepath.Join(t.TempDir(), "volume")
	if err := os.WriteFile(source, []byte("volume\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		mount  string // a volume's target
		dir    string
		starts bool
	}{
		{name: "a volume through the old root", mount: "/old/f"},
		{name: "a volume through a magic link", mount: "/magic/f"},
		{name: "a volume through ..", mount: "/rel/f"},
		{name: "a volume through a symlink within the image", mount: "/abs/f", starts: true},
		{name: "a working directory through the old root", dir: "/old/sub"},
		{name: "a working directory through a magic link", dir: "/magic/sub"},
		{name: "a working directory through a symlink within the image", dir: "/abs/sub", starts: true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			podDir, state, log := filepath.Join(dir, "pod"), filepath.Join(dir, "run"), filepath.Join(dir, "log")
			for _, d := range []string{podDir, state} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			sec := &Security{ReadOnlyHost: true, UID: 1234, GID: 1234, NoNewPrivs: true, RootLayer: podDir, Layers: imageLayerDirs(img)}
			check := "pwd"
			if tc.mount != "" {
				sec.Mounts = []Mount{{Source: source, Target: tc.mount, ReadOnly: true}}
				check = "cat " + tc.mount
			}
			p, err := Start(self, Spec{
				Exec: ExecOptions{Netns: fmt.Sprintf("/proc/%d/ns/net", os.Getpid()), Hostname: fmt.Sprint("escape", i),
					Dir: tc.dir, Argv: []string{"/bin/sh", "-c", check}, Security: sec},
				Env: []string{"PATH=/bin"}, Log: log, StateDir: state,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { Kill(state) })
			select {
			case <-p.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("the container did not end")
			}
			out := logText(t, log)
			if started := p.ExitCode() != 128; started != tc.starts {
				t.Errorf("exit code %d (started: %v, want %v); output %q; shim: %s", p.ExitCode(), started, tc.starts, out,
					readFile(filepath.Join(state, "shim.log")))
			}
			if tc.starts && !strings.Contains(out, "volume") && !strings.Contains(out, "/tmp/sub") {
				t.Errorf("output %q", out)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 0 {
				t.Fatalf("the container's setup wrote %v into the machine's %s", entries, outside)
			}
		})
	}
}
