package imagestore

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/svcnet/svcnet/internal/imagestore/imagetest"
)

// layerOf is a gzip layer of the tar stream (or another compression).
func layerOf(t *testing.T, b []byte, opts ...tarball.LayerOption) v1.Layer {
	t.Helper()
	return imagetest.LayerOf(t, bytes.NewReader(b), opts...)
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
