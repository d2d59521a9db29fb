package imagestore

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/compression"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/imagestore/imagetest"
	"github.com/svcnet/svcnet/internal/imagestore/registrytest"
)

func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPullByTagAndDigest pulls one image by tag and by digest, checks the
// record, and finds it again with Get in a new Store with the registry
// gone.
func TestPullByTagAndDigest(t *testing.T) {
	reg := registrytest.Start(t)
	l1, l2 := simpleLayer(t, "one"), simpleLayer(t, "two")
	cfg := v1.Config{
		Entrypoint:   []string{"/app/one"},
		Cmd:          []string{"--flag"},
		Env:          []string{"PATH=/bin", "A=b"},
		WorkingDir:   "/app",
		User:         "1000:1000",
		ExposedPorts: map[string]struct{}{"8080/tcp": {}, "53/udp": {}},
	}
	img := imagetest.Image(t, cfg, nil, l1, l2)
	tagRef := reg.Push(t, "team/app:v1", img)
	digest := mustDigest(t, img)
	digestRef := reg.Host() + "/team/app@" + digest.String()

	s := openStore(t)
	ctx := testContext(t)
	var progressMu sync.Mutex
	progress := map[string]Progress{}
	byTag, err := s.Pull(ctx, tagRef, PullOptions{Progress: func(p Progress) {
		progressMu.Lock()
		progress[p.DiffID] = p
		progressMu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}

	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	want := &Image{
		Ref:            tagRef,
		ID:             digestRef,
		Digest:         digest.String(),
		ManifestDigest: digest.String(),
		ConfigDigest:   m.Config.Digest.String(),
		Platform:       nodePlatform().String(),
		Config: Config{
			Entrypoint: cfg.Entrypoint, Cmd: cfg.Cmd, Env: cfg.Env, WorkingDir: "/app", User: "1000:1000",
			ExposedPorts: []string{"53/udp", "8080/tcp"},
		},
		Size: m.Config.Size + m.Layers[0].Size + m.Layers[1].Size,
	}
	for i, l := range []v1.Layer{l1, l2} {
		d := mustDiffID(t, l)
		want.Layers = append(want.Layers, Layer{DiffID: d.String(), Digest: m.Layers[i].Digest.String(), Size: m.Layers[i].Size, Dir: s.LayerDir(d.String())})
		if p := progress[d.String()]; p.Done != m.Layers[i].Size || p.Total != m.Layers[i].Size {
			t.Errorf("layer %d: last progress %+v, want %d of %d", i, p, m.Layers[i].Size, m.Layers[i].Size)
		}
	}
	if !reflect.DeepEqual(byTag, want) {
		t.Errorf("pulled by tag:\n%+v\nwant\n%+v", byTag, want)
	}
	if b, err := os.ReadFile(filepath.Join(byTag.Layers[1].Dir, "app/two")); err != nil || string(b) != "content of two\n" {
		t.Errorf("top layer's app/two: %q, %v", b, err)
	}

	byDigest, err := s.Pull(ctx, digestRef, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if byDigest.ID != want.ID || !reflect.DeepEqual(byDigest.Layers, want.Layers) || byDigest.Ref != digestRef {
		t.Errorf("pulled by digest: %+v", byDigest)
	}
	for _, l := range m.Layers {
		if n := reg.BlobGets(l.Digest); n != 1 {
			t.Errorf("blob %s fetched %d times, want once: the second pull finds its layers", l.Digest, n)
		}
	}

	// A later process, with no registry.
	reg.Close()
	s2, err := Open(s.Root())
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{tagRef, digestRef} {
		got, err := s2.Get(ref)
		if err != nil {
			t.Fatalf("Get(%s): %v", ref, err)
		}
		if got.ID != want.ID || !reflect.DeepEqual(got.Layers, want.Layers) || !reflect.DeepEqual(got.Config, want.Config) {
			t.Errorf("Get(%s) = %+v", ref, got)
		}
	}
	_, err = s2.Get(reg.Host() + "/team/app:v2")
	if !errors.Is(err, ErrNotPresent) || Reason(err) != "ErrImageNeverPull" {
		t.Errorf("Get of an image never pulled: %v", err)
	}
}

// TestPullCompressions: gzip, zstd and uncompressed layers unpack alike.
func TestPullCompressions(t *testing.T) {
	reg := registrytest.Start(t)
	raw := tarOf(t, tDir("d/", 0o755), tFile("d/f", "hello\n", 0o600))
	for _, tc := range []struct {
		name  string
		layer v1.Layer
	}{
		{"gzip", layerOf(t, raw)},
		{"zstd", layerOf(t, raw, tarball.WithCompression(compression.ZStd))},
		{"uncompressed", static.NewLayer(raw, types.OCIUncompressedLayer)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := reg.Push(t, "comp/"+tc.name+":latest", imagetest.Image(t, v1.Config{}, nil, tc.layer))
			img, err := openStore(t).Pull(testContext(t), ref, PullOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(img.Layers[0].Dir, "d/f"))
			if err != nil || string(b) != "hello\n" {
				t.Errorf("d/f: %q, %v", b, err)
			}
		})
	}
}

// TestPullIndex resolves a multi-arch index to this node's platform, and
// fails naming what an index offers when it has none for it.
func TestPullIndex(t *testing.T) {
	reg := registrytest.Start(t)
	here := nodePlatform()
	other1 := v1.Platform{OS: "linux", Architecture: "s390x"}
	other2 := v1.Platform{OS: "linux", Architecture: "arm", Variant: "v5"}
	if here.Architecture == "s390x" || here.Architecture == "arm" {
		t.Skip("the test's other platforms include this one")
	}
	imgFor := func(p v1.Platform) v1.Image {
		return imagetest.Image(t, v1.Config{}, &p, simpleLayer(t, p.Architecture))
	}
	indexOf := func(plats ...v1.Platform) v1.ImageIndex {
		var adds []mutate.IndexAddendum
		for _, p := range plats {
			adds = append(adds, mutate.IndexAddendum{Add: imgFor(p), Descriptor: v1.Descriptor{Platform: &p}})
		}
		// A build attestation, which is no platform's image.
		att := v1.Platform{OS: "unknown", Architecture: "unknown"}
		adds = append(adds, mutate.IndexAddendum{Add: imgFor(att), Descriptor: v1.Descriptor{Platform: &att}})
		return mutate.AppendManifests(empty.Index, adds...)
	}

	t.Run("resolved", func(t *testing.T) {
		idx := indexOf(other1, here, other2)
		ref := reg.PushIndex(t, "multi/app:latest", idx)
		img, err := openStore(t).Pull(testContext(t), ref, PullOptions{})
		if err != nil {
			t.Fatal(err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if img.ManifestDigest != im.Manifests[1].Digest.String() {
			t.Errorf("manifest %s, want the index's second, %s", img.ManifestDigest, im.Manifests[1].Digest)
		}
		if want := reg.Host() + "/multi/app@" + mustDigest(t, idx).String(); img.ID != want {
			t.Errorf("ID %s, want the index's digest %s", img.ID, want)
		}
		if _, err := os.Stat(filepath.Join(img.Layers[0].Dir, "app", here.Architecture)); err != nil {
			t.Errorf("not this platform's layer: %v", err)
		}
	})
	t.Run("not offered", func(t *testing.T) {
		ref := reg.PushIndex(t, "multi/other:latest", indexOf(other1, other2))
		_, err := openStore(t).Pull(testContext(t), ref, PullOptions{})
		if !errors.Is(err, ErrPlatform) {
			t.Fatalf("got %v, want ErrPlatform", err)
		}
		for _, s := range []string{"linux/s390x", "linux/arm/v5", here.String()} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not name %s", err, s)
			}
		}
		if strings.Contains(err.Error(), "unknown/unknown") {
			t.Errorf("error %q offers the attestation", err)
		}
	})
	t.Run("single manifest for another platform", func(t *testing.T) {
		ref := reg.Push(t, "single/other:latest", imgFor(other1))
		if _, err := openStore(t).Pull(testContext(t), ref, PullOptions{}); !errors.Is(err, ErrPlatform) {
			t.Fatalf("got %v, want ErrPlatform", err)
		}
	})
}

// TestPullAuth: a registry behind basic auth refuses a pull without the
// secret, or with a wrong one, and serves one with it.
func TestPullAuth(t *testing.T) {
	reg := registrytest.Start(t, registrytest.BasicAuth("puller", "s3cret"))
	ref := reg.Push(t, "private/app:1", imagetest.Image(t, v1.Config{}, nil, simpleLayer(t, "private")))
	for _, tc := range []struct {
		name    string
		secrets [][]byte
		wantErr error
	}{
		{"no secret", nil, ErrUnauthorized},
		{"wrong password", [][]byte{dockerConfig(reg.Host(), "puller", "nope")}, ErrUnauthorized},
		{"other host's secret", [][]byte{dockerConfig("example.com", "puller", "s3cret")}, ErrUnauthorized},
		{"auth field", [][]byte{dockerConfig(reg.Host(), "puller", "s3cret")}, nil},
		{"second secret, username and password, with scheme", [][]byte{
			dockerConfig("example.com", "x", "y"),
			[]byte(`{"auths":{"http://` + reg.Host() + `/private":{"username":"puller","password":"s3cret"}}}`),
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openStore(t).Pull(testContext(t), ref, PullOptions{PullSecrets: tc.secrets})
			if tc.wantErr == nil && err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != nil && (!errors.Is(err, tc.wantErr) || Reason(err) != "ErrImagePull") {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// TestPullMirrors: mirrors are tried in order before the registry, and
// the image keeps the registry's name whoever served it.
func TestPullMirrors(t *testing.T) {
	mirror := registrytest.Start(t)
	real := registrytest.Start(t)
	down := downHost(t)
	img := imagetest.Image(t, v1.Config{}, nil, simpleLayer(t, "mirrored"))
	digest := mustDigest(t, img)
	mirror.Push(t, "lib/app:1", img)
	real.Push(t, "lib/app:1", img)

	layer := mustDigest(t, mustLayers(t, img)[0])

	for _, tc := range []struct {
		name     string
		registry string
		mirrors  []string
		wantErr  error
		served   *registrytest.Registry // the one that serves the layer
	}{
		{"registry down, mirror has it", down, []string{mirror.Host()}, nil, mirror},
		{"mirror down, registry up", real.Host(), []string{down, "http://" + down}, nil, real},
		{"mirror first", real.Host(), []string{mirror.Host()}, nil, mirror},
		{"all down", down, []string{downHost(t)}, ErrNetwork, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := map[*registrytest.Registry]int{mirror: mirror.BlobGets(layer), real: real.BlobGets(layer)}
			ref := tc.registry + "/lib/app:1"
			got, err := openStore(t).Pull(testContext(t), ref, PullOptions{Mirrors: map[string][]string{tc.registry: tc.mirrors}})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.registry + "/lib/app@" + digest.String(); got.ID != want {
				t.Errorf("ID %s, want %s", got.ID, want)
			}
			for r, name := range map[*registrytest.Registry]string{mirror: "mirror", real: "registry"} {
				want := 0
				if r == tc.served {
					want = 1
				}
				if n := r.BlobGets(layer) - before[r]; n != want {
					t.Errorf("%s served the layer %d times, want %d", name, n, want)
				}
			}
		})
	}
}

func mustLayers(t *testing.T, img v1.Image) []v1.Layer {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// TestPullErrors: references the kubelet reports as InvalidImageName, and
// what a registry does not have.
func TestPullErrors(t *testing.T) {
	reg := registrytest.Start(t)
	reg.Push(t, "there/app:1", imagetest.Image(t, v1.Config{}, nil, simpleLayer(t, "x")))
	for _, tc := range []struct {
		ref     string
		wantErr error
		reason  string
	}{
		{"UPPER/case:1", ErrInvalidReference, "InvalidImageName"},
		{"app:bad tag", ErrInvalidReference, "InvalidImageName"},
		{reg.Host() + "/there/app:2", ErrNotFound, "ErrImagePull"},
		{reg.Host() + "/nothere/app:1", ErrNotFound, "ErrImagePull"},
		{reg.Host() + "/there/app@sha256:" + strings.Repeat("0", 64), ErrNotFound, "ErrImagePull"},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			_, err := openStore(t).Pull(testContext(t), tc.ref, PullOptions{})
			if !errors.Is(err, tc.wantErr) || Reason(err) != tc.reason {
				t.Fatalf("got %v (%s), want %v (%s)", err, Reason(err), tc.wantErr, tc.reason)
			}
		})
	}
}

// TestPullCorruptLayer: a blob whose content does not match its digest is
// refused, named with both digests, and leaves nothing in the store.
func TestPullCorruptLayer(t *testing.T) {
	reg := registrytest.Start(t)
	good, bad := simpleLayer(t, "good"), simpleLayer(t, "bad")
	ref := reg.Push(t, "corrupt/app:1", imagetest.Image(t, v1.Config{}, nil, good, bad))
	badDigest := mustDigest(t, bad)
	reg.Tamper(badDigest, tarOf(t, tFile("evil", "not the layer", 0o644)))

	s := openStore(t)
	_, err := s.Pull(testContext(t), ref, PullOptions{})
	if !errors.Is(err, ErrVerify) {
		t.Fatalf("got %v, want ErrVerify", err)
	}
	if !strings.Contains(err.Error(), "layer 1") || !strings.Contains(err.Error(), badDigest.String()) {
		t.Errorf("error %q does not name the layer and its digest", err)
	}
	var mm *mismatchError
	if !errors.As(err, &mm) || mm.got == mm.want || !strings.HasPrefix(mm.got, "sha256:") {
		t.Errorf("error %v does not carry the two digests", err)
	}
	if _, err := os.Stat(filepath.Dir(s.LayerDir(mustDiffID(t, bad).String()))); !os.IsNotExist(err) {
		t.Errorf("the bad layer is in the store: %v", err)
	}
	if left, _ := os.ReadDir(filepath.Join(s.Root(), "tmp")); len(left) != 0 {
		t.Errorf("tmp/ holds %v", left)
	}
	if _, err := s.Get(ref); !errors.Is(err, ErrNotPresent) {
		t.Errorf("Get after the failed pull: %v", err)
	}
}

// TestPullEscapingLayer: a layer that writes through a symlink out of its
// directory fails the pull, and nothing lands outside.
func TestPullEscapingLayer(t *testing.T) {
	reg := registrytest.Start(t)
	outside := t.TempDir()
	evil := layerOf(t, tarOf(t, tSymlink("out", outside), tFile("out/pwned", "x", 0o644)))
	ref := reg.Push(t, "evil/app:1", imagetest.Image(t, v1.Config{}, nil, evil))
	s := openStore(t)
	if _, err := s.Pull(testContext(t), ref, PullOptions{}); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("got %v, want ErrUnsafePath", err)
	}
	if _, err := os.Lstat(filepath.Join(outside, "pwned")); !os.IsNotExist(err) {
		t.Errorf("written outside the layer: %v", err)
	}
	if left, _ := os.ReadDir(filepath.Join(s.Root(), "layers", "sha256")); len(left) != 0 {
		t.Errorf("layers/ holds %v", left)
	}
}

// TestPullConcurrent: pulls of one image at once, by goroutines of one
// Store and by two Stores on one root (as two processes), fetch each
// layer blob once.
func TestPullConcurrent(t *testing.T) {
	reg := registrytest.Start(t)
	img, err := random.Image(4096, 4)
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Push(t, "busy/app:1", img)
	root := t.TempDir()
	stores := make([]*Store, 2)
	for i := range stores {
		if stores[i], err = Open(root); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testContext(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			img, err := stores[i%2].Pull(ctx, ref, PullOptions{})
			if err == nil && len(img.Layers) != 4 {
				err = errors.New("wrong layer count")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for _, l := range mustLayers(t, img) {
		if n := reg.BlobGets(mustDigest(t, l)); n != 1 {
			t.Errorf("layer %s fetched %d times", mustDigest(t, l), n)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(root, "tmp")); len(left) != 0 {
		t.Errorf("tmp/ holds %v", left)
	}
}

// TestPullOverlay pulls a two-layer image whose top layer deletes a file
// and empties a directory, stacks the layers with overlayfs as the node
// agent will, and checks the merged view.
func TestPullOverlay(t *testing.T) {
	requireRoot(t)
	reg := registrytest.Start(t)
	base := layerOf(t, tarOf(t,
		tDir("etc/", 0o755), tFile("etc/keep", "keep\n", 0o644), tFile("etc/gone", "gone\n", 0o644),
		tDir("cache/", 0o755), tFile("cache/old", "old\n", 0o644),
	))
	top := layerOf(t, tarOf(t,
		tDir("etc/", 0o755), tFile("etc/.wh.gone", "", 0o644),
		tDir("cache/", 0o755), tFile("cache/.wh..wh..opq", "", 0o644), tFile("cache/new", "new\n", 0o644),
	))
	ref := reg.Push(t, "overlay/app:1", imagetest.Image(t, v1.Config{}, nil, base, top))
	img, err := openStore(t).Pull(testContext(t), ref, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	merged := t.TempDir()
	// lowerdir lists the top layer first.
	opts := "lowerdir=" + img.Layers[1].Dir + ":" + img.Layers[0].Dir
	if err := unix.Mount("overlay", merged, "overlay", unix.MS_RDONLY, opts); err != nil {
		t.Skipf("cannot mount overlayfs here: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(merged, unix.MNT_DETACH) })
	for path, want := range map[string]string{"etc/keep": "keep\n", "etc/gone": "", "cache/old": "", "cache/new": "new\n"} {
		b, err := os.ReadFile(filepath.Join(merged, path))
		switch {
		case want == "" && !os.IsNotExist(err):
			t.Errorf("%s: %q, %v; want it hidden", path, b, err)
		case want != "" && (err != nil || string(b) != want):
			t.Errorf("%s: %q, %v; want %q", path, b, err, want)
		}
	}
}
