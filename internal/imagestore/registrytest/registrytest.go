// Package registrytest is the one in-process registry of svcnet's tests:
// go-containerregistry's in-memory registry, served in plain HTTP on a
// listener the caller gives (loopback for unit tests, one inside a
// network namespace for end-to-end tests), which logs its requests, may
// require basic auth, may serve a blob's content tampered with, and may
// hold blob fetches back.
package registrytest

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry is an in-memory registry serving on one listener until Close.
type Registry struct {
	srv        *http.Server
	host       string
	inner      http.Handler
	user, pass string

	mu       sync.Mutex
	requests []Request
	tampered map[v1.Hash][]byte
	hold     chan struct{} // while non-nil, blob fetches wait for it to close

	closeOnce sync.Once
	closeErr  error
}

// Request is one request the registry received.
type Request struct {
	Method, Path string
	// Blob is the digest of a blob fetch (GET /v2/<repo>/blobs/<digest>),
	// the zero Hash for any other request.
	Blob v1.Hash
}

// Option configures a Registry.
type Option func(*Registry)

// BasicAuth makes the registry answer 401 with a Basic challenge to every
// request, from the /v2/ ping on, without these credentials, as a private
// registry does.
func BasicAuth(user, pass string) Option {
	return func(r *Registry) { r.user, r.pass = user, pass }
}

// New serves a registry on l until Close; l is closed with it.
func New(l net.Listener, opts ...Option) *Registry {
	r := &Registry{
		host:     l.Addr().String(),
		inner:    registry.New(registry.Logger(log.New(io.Discard, "", 0))),
		tampered: map[v1.Hash][]byte{},
	}
	for _, o := range opts {
		o(r)
	}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(l) }()
	return r
}

// Start serves a registry on a new listener on 127.0.0.1, closed when the
// test ends.
func Start(t testing.TB, opts ...Option) *Registry {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := New(l, opts...)
	t.Cleanup(func() { r.Close() })
	return r
}

// Host is the registry's host:port, as references name it.
func (r *Registry) Host() string { return r.host }

// Close stops serving and closes the listener and every connection; a
// held fetch ends with its connection. Later calls do nothing.
func (r *Registry) Close() error {
	r.closeOnce.Do(func() { r.closeErr = r.srv.Close() })
	return r.closeErr
}

var blobPath = regexp.MustCompile(`^/v2/(.+)/blobs/(sha256:[0-9a-f]{64})$`)

func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
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
	rec := Request{Method: req.Method, Path: req.URL.Path}
	if m := blobPath.FindStringSubmatch(req.URL.Path); m != nil && req.Method == http.MethodGet {
		rec.Blob, _ = v1.NewHash(m[2])
	}
	r.mu.Lock()
	r.requests = append(r.requests, rec)
	bad, isBad := r.tampered[rec.Blob]
	hold := r.hold
	r.mu.Unlock()
	if rec.Blob == (v1.Hash{}) {
		r.inner.ServeHTTP(w, req)
		return
	}
	if hold != nil {
		select {
		case <-hold:
		case <-req.Context().Done():
			return
		}
	}
	if isBad {
		w.Header().Set("Content-Length", fmt.Sprint(len(bad)))
		w.Write(bad)
		return
	}
	r.inner.ServeHTTP(w, req)
}

// Requests returns the requests received so far, in order.
func (r *Registry) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.requests...)
}

// BlobGets counts the fetches of the blob with this digest so far.
func (r *Registry) BlobGets(digest v1.Hash) int {
	n := 0
	for _, req := range r.Requests() {
		if req.Blob == digest {
			n++
		}
	}
	return n
}

// AllBlobGets counts the blob fetches so far, of any blob.
func (r *Registry) AllBlobGets() int {
	n := 0
	for _, req := range r.Requests() {
		if req.Blob != (v1.Hash{}) {
			n++
		}
	}
	return n
}

// Tamper makes fetches of the blob with this digest get content instead
// (with its own Content-Length), as a corrupt mirror or disk would.
func (r *Registry) Tamper(digest v1.Hash, content []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tampered[digest] = content
}

// HoldBlobs makes blob fetches wait, from now until release is called
// (or their request ends); they are logged when they arrive. release may
// be called more than once.
func (r *Registry) HoldBlobs() (release func()) {
	ch := make(chan struct{})
	r.mu.Lock()
	r.hold = ch
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			if r.hold == ch {
				r.hold = nil
			}
			r.mu.Unlock()
			close(ch)
		})
	}
}

// pushOptions are the registry's credentials, if it requires them, then
// the caller's options.
func (r *Registry) pushOptions(opts []remote.Option) []remote.Option {
	var out []remote.Option
	if r.user != "" {
		out = append(out, remote.WithAuth(&authn.Basic{Username: r.user, Password: r.pass}))
	}
	return append(out, opts...)
}

// ref is host/repoTag, spoken to in plain HTTP whatever the host.
func (r *Registry) ref(t testing.TB, repoTag string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(r.host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// Push writes img as host/repoTag and returns that reference. opts come
// after the registry's credentials (e.g. remote.WithTransport for a
// registry in a network namespace).
func (r *Registry) Push(t testing.TB, repoTag string, img v1.Image, opts ...remote.Option) string {
	t.Helper()
	ref := r.ref(t, repoTag)
	if err := remote.Write(ref, img, r.pushOptions(opts)...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref.String()
}

// PushIndex writes a multi-arch index as host/repoTag and returns that
// reference.
func (r *Registry) PushIndex(t testing.TB, repoTag string, idx v1.ImageIndex, opts ...remote.Option) string {
	t.Helper()
	ref := r.ref(t, repoTag)
	if err := remote.WriteIndex(ref, idx, r.pushOptions(opts)...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref.String()
}
