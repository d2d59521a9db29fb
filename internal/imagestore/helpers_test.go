package imagestore

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// layerOf is a gzip layer of the tar stream (or another compression).
func layerOf(t *testing.T, b []byte, opts ...tarball.LayerOption) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// imageOf is an image of the layers for this platform (or plat), with
// the run config.
func imageOf(t *testing.T, cfg v1.Config, plat *v1.Platform, layers ...v1.Layer) v1.Image {
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

// simpleLayer is a small layer of a directory, a file and a symlink,
// which an unprivileged unpacker writes too.
func simpleLayer(t *testing.T, tag string) v1.Layer {
	return layerOf(t, tarOf(t,
		tDir("app/", 0o755),
		tFile("app/"+tag, "content of "+tag+"\n", 0o644),
		tSymlink("app/link", tag),
	))
}

// downHost is a loopback address nothing listens on.
func downHost(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String()
	l.Close()
	return host
}

// dockerConfig is a .dockerconfigjson with a basic-auth entry for host.
func dockerConfig(host, user, pass string) []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	return fmt.Appendf(nil, `{"auths":{%q:{"auth":%q}}}`, host, auth)
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustDigest(t *testing.T, d interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func mustDiffID(t *testing.T, l v1.Layer) v1.Hash {
	t.Helper()
	h, err := l.DiffID()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
