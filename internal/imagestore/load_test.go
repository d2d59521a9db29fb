package imagestore

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/svcnet/svcnet/internal/imagestore/imagetest"
	"github.com/svcnet/svcnet/internal/imagestore/registrytest"
)

// appLayer is a layer of imagetest's builder holding app/<file>, gzip
// compressed or a plain tar.
func appLayer(t *testing.T, file string, gz bool) v1.Layer {
	t.Helper()
	b, err := io.ReadAll(imagetest.Layer(t,
		imagetest.Entry{Name: "app/", Type: tar.TypeDir, Mode: 0o755},
		imagetest.File("app/"+file, "content of "+file+"\n", 0o644)))
	if err != nil {
		t.Fatal(err)
	}
	if gz {
		return layerOf(t, b)
	}
	return static.NewLayer(b, types.DockerUncompressedLayer)
}

// legacyImage is an image for dockerSaveLegacy.
type legacyImage struct {
	tags []string
	img  v1.Image
}

// dockerSaveLegacy writes the images as Docker before 25 saved them:
// <id>/layer.tar (plain), <config hex>.json, manifest.json and
// repositories; a layer saved already is a symlink to its first
// layer.tar, as Docker writes it.
func dockerSaveLegacy(t *testing.T, imgs ...legacyImage) []byte {
	t.Helper()
	var entries []archEntry
	var manifest []map[string]any
	first := map[v1.Hash]string{}
	for i, li := range imgs {
		cfg, err := li.img.RawConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		cfgName := sha256Of(cfg).Hex + ".json"
		entries = append(entries, archEntry{name: cfgName, body: cfg})
		var layerFiles []string
		for j, l := range mustLayers(t, li.img) {
			d := mustDiffID(t, l)
			sum := sha256.Sum256(fmt.Appendf(nil, "%d/%d/%s", i, j, d))
			id := hex.EncodeToString(sum[:])
			file := id + "/layer.tar"
			layerFiles = append(layerFiles, file)
			entries = append(entries, archEntry{name: id + "/", dir: true}, archEntry{name: id + "/VERSION", body: []byte("1.0")})
			if at, ok := first[d]; ok {
				entries = append(entries, archEntry{name: file, link: "../" + at})
				continue
			}
			first[d] = file
			rc, err := l.Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(rc)
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, archEntry{name: file, body: b})
		}
		manifest = append(manifest, map[string]any{"Config": cfgName, "RepoTags": li.tags, "Layers": layerFiles})
	}
	mb, err := json.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	entries = append(entries, archEntry{name: "manifest.json", body: mb}, archEntry{name: "repositories", body: []byte("{}")})
	return tarEntries(t, entries)
}

// archEntry is an entry of an archive's tar: a file, a directory or a
// symlink.
type archEntry struct {
	name string
	body []byte
	dir  bool
	link string
}

func tarEntries(t *testing.T, entries []archEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e.body)), ModTime: testMtime}
		switch {
		case e.dir:
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeDir, 0o755, 0
		case e.link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeSymlink, e.link, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ociArchive is an OCI image layout that fill writes, as a tar; extra
// files are added beside it (a Docker 25 archive's manifest.json).
func ociArchive(t *testing.T, fill func(p layout.Path), extra ...archEntry) []byte {
	t.Helper()
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	fill(p)
	var entries []archEntry
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			entries = append(entries, archEntry{name: rel + "/", dir: true})
			return nil
		}
		b, err := os.ReadFile(path)
		entries = append(entries, archEntry{name: rel, body: b})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return tarEntries(t, append(entries, extra...))
}

func appendImage(t *testing.T, p layout.Path, img v1.Image, ann map[string]string) {
	t.Helper()
	if err := p.AppendImage(img, layout.WithAnnotations(ann)); err != nil {
		t.Fatal(err)
	}
}

// rewriteTar copies an archive, giving each file's content to edit,
// which returns what to write instead, or false to leave the file out.
func rewriteTar(t *testing.T, archive []byte, edit func(name string, body []byte) ([]byte, bool)) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(archive))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			var keep bool
			if body, keep = edit(hdr.Name, body); !keep {
				continue
			}
			hdr.Size = int64(len(body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func halve(b []byte) []byte { return b[:len(b)/2] }

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// openArchive writes the archive to a file of its own, which Load reads
// in place.
func openArchive(t *testing.T, b []byte) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "archive.tar")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func configDigest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	h, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// storeDirs lists what the store's layers/, images/ and tmp/ hold.
func storeDirs(t *testing.T, s *Store) (layers, records, tmp []string) {
	t.Helper()
	list := func(dir string) []string {
		entries, err := os.ReadDir(filepath.Join(s.Root(), dir))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	return list("layers/sha256"), list("images"), list("tmp")
}

func readAppFile(t *testing.T, img *Image, file string) string {
	t.Helper()
	for i := len(img.Layers) - 1; i >= 0; i-- {
		if b, err := os.ReadFile(filepath.Join(img.Layers[i].Dir, "app", file)); err == nil {
			return string(b)
		}
	}
	return ""
}

// TestLoad loads archives of each kind and checks what the store then
// has: each image under each of its tags (Get, as a pod's IfNotPresent
// does), its ID and digest its config's, its files, and each layer once.
func TestLoad(t *testing.T) {
	here := nodePlatform()
	other1 := v1.Platform{OS: "linux", Architecture: "s390x"}
	other2 := v1.Platform{OS: "linux", Architecture: "arm", Variant: "v5"}
	if here.Architecture == "s390x" || here.Architecture == "arm" {
		t.Skip("the test's other platforms include this one")
	}
	runCfg := v1.Config{Entrypoint: []string{"/app/run"}, Env: []string{"A=b"}, User: "1000", ExposedPorts: map[string]struct{}{"8080/tcp": {}}}
	base := appLayer(t, "base", true)
	web := imagetest.Image(t, runCfg, nil, base, appLayer(t, "web", true))
	api := imagetest.Image(t, v1.Config{Cmd: []string{"api"}}, nil, base, appLayer(t, "api", true))
	plain := imagetest.Image(t, v1.Config{}, nil, appLayer(t, "plainbase", false), appLayer(t, "plain", false))
	imgFor := func(p v1.Platform) v1.Image {
		return imagetest.Image(t, v1.Config{}, &p, appLayer(t, p.Architecture, true))
	}
	multi := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: imgFor(other1), Descriptor: v1.Descriptor{Platform: &other1}},
		mutate.IndexAddendum{Add: imgFor(here), Descriptor: v1.Descriptor{Platform: &here}},
		mutate.IndexAddendum{Add: imgFor(other2), Descriptor: v1.Descriptor{Platform: &other2}},
	)
	hereImg := imgFor(here)

	// A Docker 25 archive: an OCI layout whose index names the image as
	// containerd does, and a manifest.json beside it with more tags.
	docker25 := ociArchive(t, func(p layout.Path) {
		appendImage(t, p, web, map[string]string{annotationImageName: "docker.io/library/web:1", annotationRefName: "1"})
	}, archEntry{name: "manifest.json", body: fmt.Appendf(nil, `[{"Config":"blobs/sha256/%s","RepoTags":["web:1","web:extra"],"Layers":[]}]`, configDigest(t, web).Hex)})

	for _, tc := range []struct {
		name    string
		archive []byte
		stream  bool // read through a pipe, as stdin is
		opts    LoadOptions
		// want: tag -> the image it names and a file of its top layer
		want  map[string]v1.Image
		files map[string]string
		added int // layers added to an empty store
		// index: the digest of the index the image was chosen from
		index v1.Hash
	}{
		{
			name:    "docker save, two tags, gzip layers",
			archive: imagetest.DockerSave(t, map[string]v1.Image{"web:1": web, "example.test/team/web:latest": web}),
			want:    map[string]v1.Image{"web:1": web, "example.test/team/web:latest": web},
			files:   map[string]string{"web:1": "web"},
			added:   2,
		},
		{
			name:    "docker save, two images sharing a layer, counted once",
			archive: imagetest.DockerSave(t, map[string]v1.Image{"web:1": web, "api:2": api}),
			want:    map[string]v1.Image{"web:1": web, "api:2": api},
			files:   map[string]string{"web:1": "web", "api:2": "api"},
			added:   3,
		},
		{
			name:    "docker save, plain layers",
			archive: imagetest.DockerSave(t, map[string]v1.Image{"plain:1": plain}),
			want:    map[string]v1.Image{"plain:1": plain},
			files:   map[string]string{"plain:1": "plain"},
			added:   2,
		},
		{
			name:    "docker save before Docker 25: layer.tar, a shared one linked",
			archive: dockerSaveLegacy(t, legacyImage{[]string{"web:1"}, web}, legacyImage{[]string{"api:2", "api:latest"}, api}),
			want:    map[string]v1.Image{"web:1": web, "api:2": api, "api:latest": api},
			files:   map[string]string{"web:1": "web", "api:latest": "api"},
			added:   3,
		},
		{
			name:    "docker save of Docker 25: OCI layout and manifest.json",
			archive: docker25,
			want:    map[string]v1.Image{"web:1": web, "web:extra": web},
			files:   map[string]string{"web:extra": "web"},
			added:   2,
		},
		{
			name:    "docker save | gzip, through a pipe",
			archive: gzipped(t, imagetest.DockerSave(t, map[string]v1.Image{"web:1": web})),
			stream:  true,
			want:    map[string]v1.Image{"web:1": web},
			files:   map[string]string{"web:1": "web"},
			added:   2,
		},
		{
			name: "OCI layout, full ref.name",
			archive: ociArchive(t, func(p layout.Path) {
				appendImage(t, p, api, map[string]string{annotationRefName: "example.test/api:v1"})
			}),
			want:  map[string]v1.Image{"example.test/api:v1": api},
			files: map[string]string{"example.test/api:v1": "api"},
			added: 2,
		},
		{
			name: "OCI layout, untagged, named with --tag",
			archive: ociArchive(t, func(p layout.Path) {
				appendImage(t, p, api, nil)
			}),
			opts:  LoadOptions{Name: "local/api:dev"},
			want:  map[string]v1.Image{"local/api:dev": api},
			files: map[string]string{"local/api:dev": "api"},
			added: 2,
		},
		{
			name: "OCI layout, multi-arch index: this machine's image",
			archive: ociArchive(t, func(p layout.Path) {
				if err := p.AppendIndex(multi, layout.WithAnnotations(map[string]string{annotationImageName: "example.test/multi:1"})); err != nil {
					t.Fatal(err)
				}
			}),
			want:  map[string]v1.Image{"example.test/multi:1": hereImg},
			files: map[string]string{"example.test/multi:1": here.Architecture},
			added: 1,
			index: mustDigest(t, multi),
		},
		{
			name: "OCI layout whose index.json is the multi-arch index",
			archive: ociArchive(t, func(p layout.Path) {
				ann := map[string]string{annotationImageName: "example.test/multi:2"}
				for _, plat := range []v1.Platform{other1, here, other2} {
					if err := p.AppendImage(imgFor(plat), layout.WithPlatform(plat), layout.WithAnnotations(ann)); err != nil {
						t.Fatal(err)
					}
				}
			}),
			want:  map[string]v1.Image{"example.test/multi:2": hereImg},
			files: map[string]string{"example.test/multi:2": here.Architecture},
			added: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t)
			var r io.Reader = openArchive(t, tc.archive)
			if tc.stream {
				r = bytes.NewReader(tc.archive)
			}
			res, err := s.Load(testContext(t), r, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.LayersAdded != tc.added {
				t.Errorf("%d layers added, want %d", res.LayersAdded, tc.added)
			}
			layers, _, tmp := storeDirs(t, s)
			if len(layers) != tc.added || len(tmp) != 0 {
				t.Errorf("the store holds layers %v and tmp/ %v", layers, tmp)
			}
			var gotTags []string
			for _, li := range res.Images {
				gotTags = append(gotTags, li.Tags...)
				if li.Image == nil || li.Image.Ref != li.Tags[0] || len(li.Image.Layers) == 0 || li.Image.Layers[0].Dir == "" {
					t.Errorf("loaded image %+v", li)
				}
			}
			var wantTags []string
			for tag, img := range tc.want {
				ref, err := name.ParseReference(tag)
				if err != nil {
					t.Fatal(err)
				}
				wantTags = append(wantTags, ref.Name())
				cfg := configDigest(t, img)
				got, err := s.Get(tag)
				if err != nil {
					t.Errorf("Get(%s): %v", tag, err)
					continue
				}
				wantID := ref.Context().Digest(cfg.String()).Name()
				if got.Ref != ref.Name() || got.ID != wantID || got.Digest != cfg.String() || got.ConfigDigest != cfg.String() {
					t.Errorf("Get(%s): ref %s, ID %s, digest %s; want %s, %s", tag, got.Ref, got.ID, got.Digest, ref.Name(), wantID)
				}
				ls := mustLayers(t, img)
				if len(got.Layers) != len(ls) {
					t.Fatalf("Get(%s): %d layers, want %d", tag, len(got.Layers), len(ls))
				}
				for i, l := range ls {
					if got.Layers[i].DiffID != mustDiffID(t, l).String() {
						t.Errorf("Get(%s): layer %d is %s, want %s", tag, i, got.Layers[i].DiffID, mustDiffID(t, l))
					}
				}
				cf, err := img.ConfigFile()
				if err != nil {
					t.Fatal(err)
				}
				if want := runConfig(cf.Config); fmt.Sprint(got.Config) != fmt.Sprint(want) {
					t.Errorf("Get(%s): config %+v, want %+v", tag, got.Config, want)
				}
				if got.Platform != here.String() {
					t.Errorf("Get(%s): platform %s", tag, got.Platform)
				}
				// The pod's imageID finds it too, and so does the index's
				// digest.
				if byID, err := s.Get(wantID); err != nil || byID.ID != wantID {
					t.Errorf("Get(%s) = %v, %v", wantID, byID, err)
				}
				if tc.index != (v1.Hash{}) {
					if _, err := s.Get(ref.Context().Digest(tc.index.String()).Name()); err != nil {
						t.Errorf("Get by the index's digest: %v", err)
					}
				}
				if file, ok := tc.files[tag]; ok {
					if got := readAppFile(t, got, file); got != "content of "+file+"\n" {
						t.Errorf("%s: app/%s holds %q", tag, file, got)
					}
				}
			}
			sort.Strings(gotTags)
			sort.Strings(wantTags)
			if fmt.Sprint(gotTags) != fmt.Sprint(wantTags) {
				t.Errorf("tags %v, want %v", gotTags, wantTags)
			}

			// Again: every layer is there, none is unpacked.
			again, err := s.Load(testContext(t), openArchive(t, tc.archive), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if again.LayersAdded != 0 {
				t.Errorf("loaded again: %d layers added", again.LayersAdded)
			}
		})
	}
}

// TestLoadSharesPulledLayers: a loaded image's layers that a pull has
// put in the store are not unpacked again, and the other way round.
func TestLoadSharesPulledLayers(t *testing.T) {
	reg := registrytest.Start(t)
	base := appLayer(t, "base", true)
	pulled := imagetest.Image(t, v1.Config{}, nil, base, appLayer(t, "pulled", true))
	loaded := imagetest.Image(t, v1.Config{}, nil, base, appLayer(t, "loaded", true))
	ref := reg.Push(t, "team/pulled:1", pulled)
	s := openStore(t)
	if _, err := s.Pull(testContext(t), ref, PullOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Load(testContext(t), openArchive(t, imagetest.DockerSave(t, map[string]v1.Image{"loaded:1": loaded})), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.LayersAdded != 1 {
		t.Errorf("%d layers added, want 1: the base layer is the pulled one", res.LayersAdded)
	}
	p, err := s.Get(ref)
	if err != nil {
		t.Fatal(err)
	}
	if res.Images[0].Image.Layers[0].Dir != p.Layers[0].Dir {
		t.Errorf("base layer %s, the pulled image's %s", res.Images[0].Image.Layers[0].Dir, p.Layers[0].Dir)
	}
}

// TestLoadRefuses: archives that are not whole, not what their digests
// say, or whose images cannot be named or run here fail with a clear
// error, and leave nothing in the store: no layer (not even one that
// verified), no record, nothing in tmp/.
func TestLoadRefuses(t *testing.T) {
	here := nodePlatform()
	other := v1.Platform{OS: "linux", Architecture: "s390x"}
	if here.Architecture == "s390x" {
		t.Skip("the test's other platform is this one")
	}
	good, bad := appLayer(t, "good", true), appLayer(t, "bad", true)
	img := imagetest.Image(t, v1.Config{}, nil, good, bad)
	saved := imagetest.DockerSave(t, map[string]v1.Image{"web:1": img})
	badFile := mustDigest(t, bad).Hex + ".tar.gz"
	evil := layerOf(t, tarOf(t, tFile("app/evil", "not the layer\n", 0o644)))
	evilBlob, err := evil.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	evilBytes, err := io.ReadAll(evilBlob)
	if err != nil {
		t.Fatal(err)
	}
	oci := ociArchive(t, func(p layout.Path) {
		appendImage(t, p, img, map[string]string{annotationRefName: "example.test/web:1"})
	})
	cfgBlob := "blobs/sha256/" + configDigest(t, img).Hex
	legacy := dockerSaveLegacy(t, legacyImage{[]string{"web:1"}, img})
	otherImg := imagetest.Image(t, v1.Config{}, &other, appLayer(t, "other", true))
	otherIndex := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: otherImg, Descriptor: v1.Descriptor{Platform: &other}})

	for _, tc := range []struct {
		name    string
		archive []byte
		opts    LoadOptions
		err     error
		says    []string // in the error's text
	}{
		{"not a tar", []byte(strings.Repeat("this is not an image archive\n", 40)), LoadOptions{}, ErrArchive, []string{"not a tar archive"}},
		{"empty", nil, LoadOptions{}, ErrArchive, []string{"empty"}},
		{"no manifest", tarEntries(t, []archEntry{{name: "hello.txt", body: []byte("hi")}}), LoadOptions{}, ErrArchive,
			[]string{"neither manifest.json", "index.json"}},
		{"manifest.json not JSON", tarEntries(t, []archEntry{{name: "manifest.json", body: []byte("{")}}), LoadOptions{}, ErrArchive, []string{"manifest.json"}},
		{"unknown layer reference", rewriteTar(t, saved, func(n string, b []byte) ([]byte, bool) {
			if n == "manifest.json" {
				return bytes.Replace(b, []byte(badFile), []byte("nope/layer.tar"), 1), true
			}
			return b, true
		}), LoadOptions{}, ErrArchive, []string{"layer 1", "nope/layer.tar is not in the archive"}},
		{"layer left out", rewriteTar(t, saved, func(n string, b []byte) ([]byte, bool) { return b, n != badFile }), LoadOptions{}, ErrArchive,
			[]string{badFile + " is not in the archive"}},
		{"tampered layer", rewriteTar(t, saved, func(n string, b []byte) ([]byte, bool) {
			if n == badFile {
				return evilBytes, true
			}
			return b, true
		}), LoadOptions{}, ErrVerify, []string{"layer 1 (" + badFile, mustDiffID(t, bad).String(), "digest mismatch"}},
		{"tampered layer.tar", rewriteTar(t, legacy, func(n string, b []byte) ([]byte, bool) {
			if strings.HasSuffix(n, "/layer.tar") && bytes.Contains(b, []byte("content of bad")) {
				return tarOf(t, tFile("app/bad", "content of bed\n", 0o644)), true
			}
			return b, true
		}), LoadOptions{}, ErrVerify, []string{"layer 1 (", "/layer.tar, diffID " + mustDiffID(t, bad).String(), "content: digest mismatch"}},
		{"tampered OCI layer blob", rewriteTar(t, oci, func(n string, b []byte) ([]byte, bool) {
			if n == "blobs/sha256/"+mustDigest(t, bad).Hex {
				b = bytes.Clone(b)
				b[len(b)/2] ^= 0xff
			}
			return b, true
		}), LoadOptions{}, ErrVerify, []string{"layer 1", mustDigest(t, bad).String(), "blob: digest mismatch"}},
		{"tampered config", rewriteTar(t, oci, func(n string, b []byte) ([]byte, bool) {
			if n == cfgBlob {
				return bytes.Replace(b, []byte(`"architecture"`), []byte(`"Architecture"`), 1), true
			}
			return b, true
		}), LoadOptions{}, ErrVerify, []string{"config", configDigest(t, img).String(), "digest mismatch"}},
		{"tampered legacy config", rewriteTar(t, legacy, func(n string, b []byte) ([]byte, bool) {
			if strings.HasSuffix(n, ".json") && n != "manifest.json" {
				return bytes.Replace(b, []byte(`"architecture"`), []byte(`"Architecture"`), 1), true
			}
			return b, true
		}), LoadOptions{}, ErrVerify, []string{"config", "digest mismatch"}},
		{"truncated", saved[:len(saved)/2], LoadOptions{}, ErrArchive, []string{"truncated"}},
		{"truncated gzip", halve(gzipped(t, saved)), LoadOptions{}, ErrArchive, []string{"truncated"}},
		{"untagged", ociArchive(t, func(p layout.Path) { appendImage(t, p, img, nil) }), LoadOptions{}, ErrArchive,
			[]string{"carries no name", "--tag"}},
		{"only a tag", ociArchive(t, func(p layout.Path) { appendImage(t, p, img, map[string]string{annotationRefName: "v1"}) }), LoadOptions{}, ErrArchive,
			[]string{"carries no name", `"v1"`, "tag without a repository"}},
		{"a name for two images", imagetest.DockerSave(t, map[string]v1.Image{"web:1": img, "other:1": imagetest.Image(t, v1.Config{}, nil, good)}),
			LoadOptions{Name: "mine:1"}, ErrArchive, []string{"holds 2 images"}},
		{"a digest for a name", saved, LoadOptions{Name: "web@sha256:" + strings.Repeat("a", 64)}, ErrInvalidReference, []string{"not a digest"}},
		{"another platform", imagetest.DockerSave(t, map[string]v1.Image{"other:1": otherImg}), LoadOptions{}, ErrPlatform,
			[]string{"linux/s390x", here.String()}},
		{"an index without this platform", ociArchive(t, func(p layout.Path) {
			if err := p.AppendIndex(otherIndex, layout.WithAnnotations(map[string]string{annotationImageName: "example.test/multi:1"})); err != nil {
				t.Fatal(err)
			}
		}), LoadOptions{}, ErrPlatform, []string{"offers linux/s390x", here.String()}},
		{"index.json without this platform", ociArchive(t, func(p layout.Path) {
			if err := p.AppendImage(otherImg, layout.WithPlatform(other), layout.WithAnnotations(map[string]string{annotationImageName: "example.test/other:1"})); err != nil {
				t.Fatal(err)
			}
		}), LoadOptions{}, ErrPlatform, []string{"index.json offers linux/s390x", here.String()}},
		{"diffIDs and layers differ", rewriteTar(t, saved, func(n string, b []byte) ([]byte, bool) {
			if n == "manifest.json" {
				return bytes.Replace(b, []byte(`,"`+badFile+`"`), nil, 1), true
			}
			return b, true
		}), LoadOptions{}, ErrVerify, []string{"1 layers, its config 2 diffIDs"}},
		{"OCI layout of another version", rewriteTar(t, oci, func(n string, b []byte) ([]byte, bool) {
			if n == "oci-layout" {
				return []byte(`{"imageLayoutVersion":"2.0.0"}`), true
			}
			return b, true
		}), LoadOptions{}, ErrArchive, []string{`"2.0.0"`}},
		{"OCI layout without a layer blob", rewriteTar(t, oci, func(n string, b []byte) ([]byte, bool) {
			return b, n != "blobs/sha256/"+mustDigest(t, bad).Hex
		}), LoadOptions{}, ErrArchive, []string{"layer 1", mustDigest(t, bad).String() + " is not in the archive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t)
			_, err := s.Load(testContext(t), openArchive(t, tc.archive), tc.opts)
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
			t.Log(err)
			for _, want := range tc.says {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if layers, records, tmp := storeDirs(t, s); len(layers)+len(records)+len(tmp) != 0 {
				t.Errorf("after the failed load the store holds layers %v, records %v, tmp/ %v", layers, records, tmp)
			}
		})
	}
}
