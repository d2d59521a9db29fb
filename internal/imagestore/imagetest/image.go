package imagetest

import (
	"bytes"
	"io"
	"runtime"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// LayerOf is the layer of the uncompressed tar stream r (as Layer and
// Busybox write it), gzip compressed unless opts say otherwise. r is read
// whole: the layer opens its content again each time it is read.
func LayerOf(t testing.TB, r io.Reader, opts ...tarball.LayerOption) v1.Layer {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Image is a single-platform image of layers, bottom first, with run
// config cfg. Its config names plat's platform; a nil plat means this
// machine's OS and architecture, without a variant, which a store on
// this machine accepts.
func Image(t testing.TB, cfg v1.Config, plat *v1.Platform, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = runtime.GOOS, runtime.GOARCH
	if plat != nil {
		cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	}
	cf.Config = cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// DockerSave is the archive `docker save` writes of the images under
// their tags (several tags may name one image), in go-containerregistry's
// tarball format: manifest.json, the config as sha256:<hex>, the layers
// as <hex>.tar.gz or .tar.
func DockerSave(t testing.TB, tagged map[string]v1.Image) []byte {
	t.Helper()
	refs := map[name.Reference]v1.Image{}
	for tag, img := range tagged {
		ref, err := name.ParseReference(tag)
		if err != nil {
			t.Fatal(err)
		}
		refs[ref] = img
	}
	var buf bytes.Buffer
	if err := tarball.MultiRefWrite(refs, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
