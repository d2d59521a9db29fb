package proxy

import (
	"io"
	"net/http"
	"sync"

	"github.com/svcnet/svcnet/internal/ingress/annotations"
	"github.com/svcnet/svcnet/internal/ingress/upstream"
)

// retrying sends a request to the endpoint the handler picked and, as
// the upstream package's next-upstream rules say, again or to the next
// ones.
type retrying struct{ p *Proxy }

func (t *retrying) RoundTrip(r *http.Request) (*http.Response, error) {
	req := r.Context().Value(requestKey{}).(*request)
	var body *onceBody
	if r.Body != nil && r.Body != http.NoBody {
		body = &onceBody{ReadCloser: r.Body}
	}
	n := len(req.eps)
	fresh := false
	var err error
	for i := 0; i < n; {
		out := *r
		u := *r.URL
		u.Host = req.eps[(req.start+i)%n]
		out.URL = &u
		if body != nil {
			out.Body = body
		}
		req.upstream = u.Host
		var resp *http.Response
		var reused bool
		resp, reused, err = t.send(&out, req, fresh)
		if err == nil {
			return resp, nil
		}
		if body != nil {
			if bodyErr := body.failure(); bodyErr != nil {
				// The client's body failed (over the limit, say): that is
				// the answer, not whatever the pod made of half a body.
				err = bodyErr
				break
			}
		}
		if r.Context().Err() != nil {
			break
		}
		next := upstream.After(err, upstream.Attempt{Method: r.Method, Reused: reused, Body: body != nil})
		if next == upstream.Fail {
			break
		}
		if upstream.DialFailed(err) {
			t.p.metrics.connectErrors.Inc()
		}
		fresh = next == upstream.Again
		if next == upstream.Another {
			i++
		}
	}
	if body != nil {
		body.ReadCloser.Close()
	}
	return nil, err
}

// send picks the client for the backend's protocol: net/http's
// Transport for TLS and HTTP/2 (which retries on stale connections
// itself), the pods' HTTP/1.1 client otherwise.
func (t *retrying) send(r *http.Request, req *request, fresh bool) (*http.Response, bool, error) {
	var resp *http.Response
	var err error
	switch req.cfg.BackendProtocol {
	case annotations.HTTPS:
		resp, err = t.p.tlsPods.RoundTrip(r)
	case annotations.GRPCS:
		resp, err = t.p.grpcsPods.RoundTrip(r)
	case annotations.GRPC, annotations.H2C:
		resp, err = t.p.h2cPods.RoundTrip(r)
	default:
		return t.p.pods.Do(r, r.URL.Host, fresh, upstream.Timeouts{Connect: req.cfg.ConnectTimeout, Read: req.cfg.ReadTimeout, Send: req.cfg.SendTimeout})
	}
	return resp, false, err
}

// onceBody keeps the request body open across attempts (a client closes
// it on every error) and remembers how reading it failed.
type onceBody struct {
	io.ReadCloser
	mu  sync.Mutex
	err error // the body's own failure, not its end
}

func (b *onceBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.mu.Lock()
		b.err = err
		b.mu.Unlock()
	}
	return n, err
}

func (b *onceBody) Close() error { return nil }

// failure is how reading the body failed. The lock: an http.Transport
// (HTTPS and HTTP/2 backends) reads the body on a goroutine of its own.
func (b *onceBody) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// bufferPool lends the reverse proxy its copy buffers.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *buffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }

// copyAnswer passes body on to w, reading no more at a time than room
// says the client's socket takes without waiting, and no more than a
// buffer of the pool, which it holds only for that read and write. A
// client that takes nothing costs no buffer then (nor, over TLS, a
// record's): the goroutine waits in room, and the rest of the answer in
// the pod's socket. A client that keeps up gets a buffer's worth at each
// write, as from the reverse proxy's own copy.
func copyAnswer(w io.Writer, body io.Reader, room func() (int, error)) error {
	for {
		n, err := room()
		if err != nil {
			return err
		}
		buf := buffers.Get().(*[]byte)
		m, rerr := body.Read((*buf)[:min(n, len(*buf))])

		var werr error
		if m > 0 {
			_, werr = w.Write((*buf)[:m])
		}
		buffers.Put(buf)
		switch {
		case werr != nil:
			return werr
		case rerr == io.EOF:
			return nil
		case rerr != nil:
			return rerr
		}
	}
}
