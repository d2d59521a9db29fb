package imagestore

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
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

var blobPath = regexp.MustCompile(`^/v2/(.+)/blobs/(sha256:[0-9a-f]{64})$`)

// testRegistry is go-containerregistry's in-memory registry on loopback,
// which counts blob fetches, may require basic auth, and may serve a
// blob's content corrupted.
type testRegistry struct {
	srv        *httptest.Server
	host       string
	inner      http.Handler
	user, pass string

	mu       sync.Mutex
	blobGets map[string]int    // digest -> GETs
	corrupt  map[string][]byte // digest -> content served instead
}

func startRegistry(t *testing.T) *testRegistry {
	t.Helper()
	r := &testRegistry{
		inner:    registry.New(registry.Logger(log.New(io.Discard, "", 0))),
		blobGets: map[string]int{},
		corrupt:  map[string][]byte{},
	}
	r.srv = httptest.NewServer(r) // 127.0.0.1
	t.Cleanup(r.srv.Close)
	r.host = r.srv.Listener.Addr().String()
	return r
}

func (r *testRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.user != "" {
		u, p, ok := req.BasicAuth()
		if !ok || u != r.user || p != r.pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
	}
	if m := blobPath.FindStringSubmatch(req.URL.Path); m != nil && req.Method == http.MethodGet {
		r.mu.Lock()
		r.blobGets[m[2]]++
		bad, isBad := r.corrupt[m[2]]
		r.mu.Unlock()
		if isBad {
			w.Header().Set("Content-Length", fmt.Sprint(len(bad)))
			w.Write(bad)
			return
		}
	}
	r.inner.ServeHTTP(w, req)
}

func (r *testRegistry) gets(digest v1.Hash) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blobGets[digest.String()]
}

func (r *testRegistry) pushOpts() []remote.Option {
	if r.user == "" {
		return nil
	}
	return []remote.Option{remote.WithAuth(&authn.Basic{Username: r.user, Password: r.pass})}
}

// push writes img as host/repo:tag and returns that reference.
func (r *testRegistry) push(t *testing.T, repoTag string, img v1.Image) string {
	t.Helper()
	ref, err := name.ParseReference(r.host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, r.pushOpts()...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref.String()
}

func (r *testRegistry) pushIndex(t *testing.T, repoTag string, idx v1.ImageIndex) string {
	t.Helper()
	ref, err := name.ParseReference(r.host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx, r.pushOpts()...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref.String()
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
