package proxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"

	"github.com/svcnet/svcnet/internal/ingress/annotations"
)

// retrying sends a request to the endpoint the handler picked and, when
// connecting fails, to the next ones in turn: nothing reached the pod, so
// any method may be retried. Once a connection is made, an error is final
// (the transport itself retries idempotent requests on a stale
// keep-alive connection).
type retrying struct{ p *Proxy }

func (t *retrying) RoundTrip(r *http.Request) (*http.Response, error) {
	req := r.Context().Value(requestKey{}).(*request)
	var body *onceBody
	if r.Body != nil && r.Body != http.NoBody {
		body = &onceBody{ReadCloser: r.Body}
	}
	n := len(req.eps)
	var err error
	for i := 0; i < n; i++ {
		out := *r
		u := *r.URL
		u.Host = req.eps[(req.start+i)%n]
		out.URL = &u
		if body != nil {
			out.Body = body
		}
		req.upstream = u.Host
		var resp *http.Response
		resp, err = t.send(&out, req)
		if err == nil {
			return resp, nil
		}
		var sent bool
		if body != nil {
			var bodyErr error
			if sent, bodyErr = body.state(); bodyErr != nil {
				// The client's body failed (over the limit, say): that is
				// the answer, not whatever the pod made of half a body.
				err = bodyErr
				break
			}
		}
		if sent || r.Context().Err() != nil {
			break
		}
		if !dialFailed(err) {
			if body == nil && idempotent(r.Method) && answeredNothing(err) {
				continue
			}
			break
		}
		t.p.metrics.connectErrors.Inc()
	}
	if body != nil {
		body.ReadCloser.Close()
	}
	return nil, err
}

// send picks the client for the backend's protocol.
func (t *retrying) send(r *http.Request, req *request) (*http.Response, error) {
	switch req.cfg.BackendProtocol {
	case annotations.HTTPS:
		return t.p.tlsPods.RoundTrip(r)
	case annotations.GRPCS:
		return t.p.grpcsPods.RoundTrip(r)
	case annotations.GRPC, annotations.H2C:
		return t.p.h2cPods.RoundTrip(r)
	}
	return t.p.pods.do(r, timeouts{connect: req.cfg.ConnectTimeout, read: req.cfg.ReadTimeout, send: req.cfg.SendTimeout})
}

// answeredNothing reports whether err is a pod's connection closed or
// reset before any byte of an answer: a pod that was stopping when it
// accepted. Idempotent requests without a body then try the next
// endpoint, as nginx's proxy_next_upstream error does; when every
// endpoint fails so, the answer is 502.
func answeredNothing(err error) bool {
	return errors.Is(err, errStale) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// idempotent reports the methods RFC 9110 calls idempotent.
func idempotent(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}

// dialFailed reports whether err is a failure to connect.
func dialFailed(err error) bool {
	var d dialError
	var op *net.OpError
	return errors.As(err, &d) || (errors.As(err, &op) && op.Op == "dial")
}

// onceBody keeps the request body open across connect attempts (the
// transport closes it on every error) and remembers whether any of it was
// read, after which a retry would send a truncated body.
type onceBody struct {
	io.ReadCloser
	mu  sync.Mutex
	n   int64
	err error // the body's own failure, not its end
}

func (b *onceBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	b.n += int64(n)
	if err != nil && err != io.EOF {
		b.err = err
	}
	b.mu.Unlock()
	return n, err
}

func (b *onceBody) Close() error { return nil }

// state says whether any of the body was read, and how reading it failed.
// The lock: an http.Transport (HTTPS and HTTP/2 backends) reads the body
// on a goroutine of its own.
func (b *onceBody) state() (sent bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n > 0, b.err
}

// bufferPool lends the reverse proxy its copy buffers.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *buffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }
