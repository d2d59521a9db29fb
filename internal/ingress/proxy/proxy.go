// Package proxy is the ingress's HTTP reverse proxy: it matches each
// request through the current routing (a route.Router), picks an endpoint
// of the route's backend (the upstream package's rules) and forwards the
// request straight to the pod, never through the ClusterIP. It serves the
// requests the engine declines with net/http's server and reverse proxy,
// and is the engine's Handler for the others. The routing and the
// endpoint sets are immutable snapshots swapped atomically, so a change
// never restarts a listener or drops a connection.
package proxy

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"io"
	mrand "math/rand/v2"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/svcnet/svcnet/internal/ingress/annotations"
	"github.com/svcnet/svcnet/internal/ingress/engine"
	"github.com/svcnet/svcnet/internal/ingress/route"
	"github.com/svcnet/svcnet/internal/ingress/upstream"
)

// Options tunes the proxy; zero values take the defaults, which are
// ingress-nginx's where it has one.
type Options struct {
	// ConnectTimeout bounds connecting to a pod (default 5s).
	ConnectTimeout time.Duration
	// ReadTimeout bounds the wait for a pod's response headers (60s).
	ReadTimeout time.Duration
	// SendTimeout bounds the wait for a client to take any byte of its
	// answer (60s, nginx's send_timeout): the time between two writes
	// that make progress, not the whole answer's. A client that takes
	// nothing for that long is closed, on every path.
	SendTimeout time.Duration
	// MaxBodyBytes is the largest request body accepted (1 MiB, as
	// ingress-nginx's proxy-body-size); larger ones get 413. Negative: no
	// limit.
	MaxBodyBytes int64
	// MaxIdlePerEndpoint is the number of idle keep-alive connections kept
	// per pod (256).
	MaxIdlePerEndpoint int
	// AccessLog receives one JSON line per request; nil logs nothing.
	AccessLog io.Writer
	// Registerer receives the proxy's metrics; nil registers none.
	Registerer prometheus.Registerer
	// HTTPSPort is where HTTPS is served, for redirects (443 is left out
	// of the URL).
	HTTPSPort int
	// EventLoops is the number of event loops of NewEngine; 0:
	// engine.DefaultLoops.
	EventLoops int
}

func (o *Options) defaults() {
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = 60 * time.Second
	}
	if o.SendTimeout == 0 {
		o.SendTimeout = 60 * time.Second
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.HTTPSPort == 0 {
		o.HTTPSPort = 443
	}
	if o.MaxIdlePerEndpoint == 0 {
		o.MaxIdlePerEndpoint = 256
	}
	if o.EventLoops <= 0 {
		o.EventLoops = engine.DefaultLoops()
	}
}

// Proxy forwards requests by the routing table it was last given.
type Proxy struct {
	opts      Options
	cfg       atomic.Pointer[config]
	certs     atomic.Pointer[Certs]
	pods      *upstream.Client
	tlsPods   *http.Transport // HTTPS backends: HTTP/1.1 over TLS
	grpcsPods *http.Transport // GRPCS backends: HTTP/2 over TLS
	h2cPods   *http.Transport // GRPC and H2C backends: HTTP/2 without TLS
	mirrors   *http.Client    // copies of requests to Gateway routes' mirrors
	rp        *httputil.ReverseProxy
	metrics   *metrics
	log       *accessLog
}

// config is one routing with the upstreams of its backends.
type config struct {
	router route.Router
	ups    []*upstream.Upstream
}

// New returns a proxy that answers 503 until the first Set.
func New(o Options) *Proxy {
	o.defaults()
	p := &Proxy{opts: o, metrics: newMetrics(o.Registerer)}
	p.certs.Store(NewCerts(nil))
	if o.AccessLog != nil {
		p.log = newAccessLog(o.AccessLog)
	}
	p.pods = upstream.NewClient(o.ConnectTimeout, o.ReadTimeout, o.MaxIdlePerEndpoint)
	dial := (&net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	// Pods' certificates are not verified, as ingress-nginx's
	// proxy-ssl-verify defaults to off: they are rarely issued for the
	// addresses the proxy dials.
	h1, h2, h2c := new(http.Protocols), new(http.Protocols), new(http.Protocols)
	h1.SetHTTP1(true)
	h2.SetHTTP2(true)
	p.tlsPods = &http.Transport{DialContext: dial, MaxIdleConnsPerHost: o.MaxIdlePerEndpoint, IdleConnTimeout: 60 * time.Second,
		ResponseHeaderTimeout: o.ReadTimeout, DisableCompression: true, Protocols: h1,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	p.grpcsPods = &http.Transport{DialContext: dial, MaxIdleConnsPerHost: o.MaxIdlePerEndpoint, IdleConnTimeout: 60 * time.Second,
		DisableCompression: true, Protocols: h2, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	h2c.SetUnencryptedHTTP2(true)
	p.h2cPods = &http.Transport{DialContext: dial, MaxIdleConnsPerHost: o.MaxIdlePerEndpoint, IdleConnTimeout: 60 * time.Second,
		DisableCompression: true, Protocols: h2c}
	p.mirrors = &http.Client{Timeout: o.ConnectTimeout + o.ReadTimeout, Transport: &http.Transport{DialContext: dial,
		MaxIdleConnsPerHost: o.MaxIdlePerEndpoint, IdleConnTimeout: 60 * time.Second, ResponseHeaderTimeout: o.ReadTimeout,
		DisableCompression: true, Protocols: h1}}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      &retrying{p: p},
		ErrorHandler:   p.proxyError,
		ModifyResponse: p.modifyResponse,
		BufferPool:     bufferPool{},
		ErrorLog:       nil,
	}
	return p
}

// Set swaps in a routing and the upstreams of its backends (in its
// BackendRefs' order).
func (p *Proxy) Set(r route.Router, ups []*upstream.Upstream) {
	p.cfg.Store(&config{router: r, ups: ups})
}

// Ready reports whether a table was set.
func (p *Proxy) Ready() bool { return p.cfg.Load() != nil }

// Close flushes the access log and closes idle connections to pods.
func (p *Proxy) Close() {
	p.pods.CloseIdle()
	p.tlsPods.CloseIdleConnections()
	p.grpcsPods.CloseIdleConnections()
	p.h2cPods.CloseIdleConnections()
	p.mirrors.CloseIdleConnections()
	if p.log != nil {
		p.log.Close()
	}
}

// ClientConn is c, a client connection net/http's server is to serve,
// with the send timeout (Options.SendTimeout), counted in the metrics.
func (p *Proxy) ClientConn(c net.Conn) net.Conn {
	return engine.WithWriteTimeout(c, p.opts.SendTimeout, p.metrics.sendTimeouts.Inc)
}

// ConnContext is the context of the requests of c, a client connection
// net/http's server serves: with what tells the room in c's socket (see
// passOn), when c is one of ClientConn's.
func (p *Proxy) ConnContext(ctx context.Context, c net.Conn) context.Context {
	for {
		if r, ok := c.(roomer); ok {
			return context.WithValue(ctx, roomKey{}, r)
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return ctx
		}
		c = w.NetConn()
	}
}

// roomer tells how many bytes a client's socket takes without waiting
// (engine.WithWriteTimeout's connections).
type roomer interface{ Room() (int, error) }

type roomKey struct{}

// Handler serves one listener; scheme and port are what the
// X-Forwarded-Proto and X-Forwarded-Port headers tell the pods.
func (p *Proxy) Handler(port int) http.Handler {
	return &handler{p: p, port: strconv.Itoa(port), portNum: port}
}

type handler struct {
	p       *Proxy
	port    string
	portNum int
}

// request is what one request carries through the reverse proxy.
type request struct {
	route    *route.Route
	up       *upstream.Upstream
	eps      []string
	start    int
	path     string // cleaned; differs from the request's when it had to be
	port     string
	cfg      *annotations.Config
	upstream string // the endpoint that answered (or failed last)
	id       string // X-Request-ID
	cookie   string // the affinity cookie's valid value, if the client sent one
	host     string // the Host the pod is asked for, when not the client's
	bounded  bool   // the route's timeout bounds the request's context
	// room is the client's socket's (HTTP/1 clients of ClientConn);
	// answer, the body modifyResponse kept from the reverse proxy for
	// passOn.
	room   roomer
	answer io.ReadCloser
}

type requestKey struct{}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	lw := &logWriter{ResponseWriter: w}
	req := &request{port: h.port}
	defer h.p.finish(lw, r, req, start)

	cfg := h.p.cfg.Load()
	if cfg == nil {
		http.Error(lw, "ingress routes not synced yet", http.StatusServiceUnavailable)
		return
	}
	clean, ok := route.CleanPath(r.URL.Path)
	if !ok {
		http.Error(lw, "bad request path", http.StatusBadRequest)
		return
	}
	rt := cfg.router.Route(&route.Request{Host: r.Host, Path: clean, Method: r.Method, Header: r.Header.Get,
		Port: h.portNum, Query: func() string { return r.URL.RawQuery }})
	if rt == nil {
		http.Error(lw, "404 page not found: no Ingress rule matches", http.StatusNotFound)
		return
	}
	if rt.RedirectHTTPS && r.TLS == nil {
		h.p.redirect(lw, r, clean)
		return
	}
	if rt.Canary != nil && useCanary(r, rt.Canary.Rule) {
		rt = rt.Canary
	}
	if hr := rt.HTTPRule; hr != nil {
		req.route = rt
		if c := hr.CORS; c != nil {
			if origin := r.Header.Get("Origin"); origin != "" && c.Allows(origin) {
				if route.Preflight(r) {
					c.PreflightHeaders(lw.Header(), r)
				} else {
					c.ResponseHeaders(lw.Header(), origin)
				}
			}
			if route.Preflight(r) {
				// Answered here; one from an origin not allowed
				// gets no CORS headers, and the browser stops.
				lw.WriteHeader(http.StatusNoContent)
				return
			}
		}
		if hr.Redirect != nil {
			gatewayRedirect(lw, r, hr.Redirect, clean)
			return
		}
		// Answers of the proxy itself get the response's edits too.
		lw.edit, lw.backendEdit = hr.ResponseHeaders, hr.BackendResponseHeaders
		hr.RequestHeaders.Apply(r.Header)
		hr.BackendRequestHeaders.Apply(r.Header)
	}
	if rt.Answer != 0 {
		req.route = rt
		http.Error(lw, strconv.Itoa(rt.Answer)+" "+http.StatusText(rt.Answer)+": the route's backend cannot be used (see the route's status)", rt.Answer)
		return
	}
	req.route, req.up = rt, cfg.ups[rt.Backend]
	ann := rt.Config
	if ann == nil {
		ann = &noConfig
	}
	if len(ann.SourceRanges) > 0 && !allowed(r.RemoteAddr, ann.SourceRanges) {
		http.Error(lw, "403 forbidden: the client's address is not allowed", http.StatusForbidden)
		return
	}
	set := req.up.Load()
	req.eps = set.Addrs
	if len(req.eps) == 0 {
		http.Error(lw, "503 service unavailable: no ready endpoint for "+req.up.Ref.String(), http.StatusServiceUnavailable)
		return
	}
	max := h.p.opts.MaxBodyBytes
	if ann.BodySize != 0 {
		max = ann.BodySize
	}
	if max > 0 {
		if r.ContentLength > max {
			lw.Header().Set("Connection", "close")
			http.Error(lw, "request body larger than "+strconv.FormatInt(max, 10)+" bytes", http.StatusRequestEntityTooLarge)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(lw, r.Body, max)
		}
	}
	req.start = -1
	if a := ann.Affinity; a != nil {
		if c, err := r.Cookie(a.Cookie); err == nil {
			if i, ok := set.ByAffinity(c.Value); ok {
				req.start, req.cookie = i, c.Value
			}
		}
	}
	if req.start < 0 {
		req.start = req.up.Pick(len(req.eps))
	}
	req.cfg = ann
	switch {
	case ann.RewriteTarget != "":
		req.path = rewritePath(rt, clean, ann.RewriteTarget)
	case clean != r.URL.Path:
		req.path = clean
	}
	if hr := rt.HTTPRule; hr != nil && hr.Rewrite != nil {
		if hr.Rewrite.Path != nil {
			req.path = hr.Rewrite.Path.Apply(clean)
		}
		req.host = hr.Rewrite.Hostname
	}
	if r.ProtoMajor == 1 {
		req.room, _ = r.Context().Value(roomKey{}).(roomer)
	}
	if hr := rt.HTTPRule; hr != nil && len(hr.Mirrors) > 0 {
		path := req.path
		if path == "" {
			path = r.URL.Path
		}
		h.p.mirror(r, path, req.host, hr.Mirrors, cfg.ups)
	}
	ctx := r.Context()
	if hr := rt.HTTPRule; hr != nil && hr.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, hr.Timeout)
		defer cancel()
		req.bounded = true
	}
	h.p.rp.ServeHTTP(lw, r.WithContext(context.WithValue(ctx, requestKey{}, req)))
	if req.answer != nil {
		passOn(lw, req)
	}
}

// useCanary decides, in ingress-nginx's order, whether a request goes to
// the canary: by its header (with a value to match, or "always" and
// "never"), then its cookie ("always", "never"), then by weight.
func useCanary(r *http.Request, rule *annotations.Canary) bool {
	if rule.Header != "" {
		v := r.Header.Get(rule.Header)
		switch {
		case rule.HeaderValue != "" && v == rule.HeaderValue:
			return true
		case rule.HeaderValue == "" && v == "always":
			return true
		case rule.HeaderValue == "" && v == "never":
			return false
		}
	}
	if rule.Cookie != "" {
		if c, err := r.Cookie(rule.Cookie); err == nil {
			switch c.Value {
			case "always":
				return true
			case "never":
				return false
			}
		}
	}
	return rule.Weight > 0 && mrand.IntN(rule.WeightTotal) < rule.Weight
}

// noConfig is an Ingress without annotations.
var noConfig = annotations.Config{SSLRedirect: true}

// allowed reports whether the client's address is in one of the ranges.
func allowed(remote string, ranges []netip.Prefix) bool {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return false
	}
	a := ap.Addr().Unmap()
	for _, p := range ranges {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// rewritePath replaces what the route matched of a cleaned path with the
// target: for a Prefix rule the rule's prefix (the rest is kept, /api/v1
// with Prefix /api and target /v2 goes to /v2/v1), for an Exact rule or a
// default backend the whole path.
func rewritePath(rt *route.Route, clean, target string) string {
	if rt.PathType != networkingv1.PathTypePrefix {
		return target
	}
	rest := clean[len(strings.TrimSuffix(rt.Path, "/")):]
	switch {
	case rest == "", rest == "/" && rt.Path == "/":
		return target
	case rest == "/":
		return strings.TrimSuffix(target, "/") + "/"
	}
	return strings.TrimSuffix(target, "/") + rest
}

// redirect sends a plain HTTP request to the same URL over HTTPS, with
// 308 so that the method and body are kept.
func (p *Proxy) redirect(w http.ResponseWriter, r *http.Request, path string) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if p.opts.HTTPSPort != 443 {
		host = net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(p.opts.HTTPSPort))
	}
	u := url.URL{Scheme: "https", Host: host, Path: path, RawQuery: r.URL.RawQuery}
	http.Redirect(w, r, u.String(), http.StatusPermanentRedirect)
}

// gatewayRedirect answers with a Gateway API rule's redirect: the
// request's URL with the scheme, hostname, port and path the rule sets. The
// port is the rule's, else the request's when the rule keeps the
// scheme, else none (the new scheme's well-known one); a scheme's
// well-known port is never written.
func gatewayRedirect(w http.ResponseWriter, r *http.Request, red *route.Redirect, clean string) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		host, port = r.Host, ""
	}
	if red.Hostname != "" {
		host = red.Hostname
	}
	if red.Scheme != "" && red.Scheme != scheme {
		scheme, port = red.Scheme, ""
	}
	if red.Port != 0 {
		port = strconv.Itoa(red.Port)
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		host = net.JoinHostPort(strings.Trim(host, "[]"), port)
	}
	u := url.URL{Scheme: scheme, Host: host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	if red.Path != nil {
		u.Path, u.RawPath = red.Path.Apply(clean), ""
	}
	w.Header().Set("Location", u.String())
	w.WriteHeader(red.Status)
}

// rewrite makes the request a pod receives: the Host passed through, the
// X-Forwarded headers set as ingress-nginx sets them by default (the
// client's own X-Forwarded-For is not trusted), X-Request-ID kept or made.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	req := pr.In.Context().Value(requestKey{}).(*request)
	out := pr.Out
	out.URL.Scheme = "http"
	if p := req.cfg.BackendProtocol; p == annotations.HTTPS || p == annotations.GRPCS {
		out.URL.Scheme = "https"
	}
	out.URL.Host = req.eps[req.start] // the transport picks again on retries
	if req.path != "" {
		out.URL.Path, out.URL.RawPath = req.path, ""
	}
	if req.host != "" {
		out.Host = req.host
	}
	pr.SetXForwarded()
	out.Header.Set("X-Forwarded-Port", req.port)
	if ip, _, err := net.SplitHostPort(pr.In.RemoteAddr); err == nil {
		out.Header.Set("X-Real-IP", ip)
	}
	if out.Header.Get("X-Request-ID") == "" {
		var id [16]byte
		_, _ = rand.Read(id[:])
		out.Header.Set("X-Request-ID", hex.EncodeToString(id[:]))
	}
	req.id = out.Header.Get("X-Request-ID")
}

// modifyResponse registers upgraded connections with their upstream, and
// gives a client with affinity the cookie of the pod that answered, when
// it did not send that one.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	req := resp.Request.Context().Value(requestKey{}).(*request)
	if t, ok := resp.Body.(*upstream.Upgraded); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		t.OnClose(req.up.Track(t, req.upstream))
	}
	if req.room != nil && ownCopy(resp) {
		req.answer, resp.Body = resp.Body, http.NoBody
	}
	a := req.cfg.Affinity
	if a == nil || req.upstream == "" {
		return nil
	}
	id := upstream.AffinityID(req.upstream)
	if id == req.cookie {
		return nil
	}
	c := &http.Cookie{Name: a.Cookie, Value: id, Path: a.Path, HttpOnly: true, Secure: a.Secure, SameSite: a.SameSite}
	if a.MaxAge > 0 {
		c.MaxAge = int(a.MaxAge / time.Second)
		c.Expires = time.Now().Add(a.MaxAge)
	}
	resp.Header.Add("Set-Cookie", c.String())
	return nil
}

// ownCopy reports whether passOn is to copy an answer's body rather
// than the reverse proxy: a body of known length without trailers, that
// the reverse proxy would copy as it is, unflushed. The others (chunked
// and streamed answers, which it flushes as they come; trailers, which
// it writes after the body; upgrades) stay its own.
func ownCopy(resp *http.Response) bool {
	if resp.StatusCode < 200 || resp.Body == http.NoBody || resp.ContentLength <= 0 || len(resp.Trailer) > 0 {
		return false
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return ct != "text/event-stream"
}

// passOn writes the answer's body that modifyResponse kept from the
// reverse proxy, once the proxy has written its head, with copyAnswer:
// a client that stops reading holds neither a copy buffer nor a
// goroutine blocked in a write deep under the reverse proxy, whose stack
// the runtime could not shrink. A body that could not be passed on
// whole aborts the connection, as the reverse proxy does.
func passOn(w http.ResponseWriter, req *request) {
	err := copyAnswer(w, req.answer, req.room.Room)
	req.answer.Close()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
}

// proxyError answers a request the pods could not: 413 for a body over
// the limit, 504 for a timeout, 502 for anything else (a refused or reset
// connection, a pod that answered nothing).
func (p *Proxy) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		w.Header().Set("Connection", "close")
		http.Error(w, "request body larger than "+strconv.FormatInt(tooBig.Limit, 10)+" bytes", http.StatusRequestEntityTooLarge)
	case errors.Is(r.Context().Err(), context.DeadlineExceeded) && r.Context().Value(requestKey{}).(*request).bounded:
		// The route's timeout ran out.
		http.Error(w, "504 gateway timeout: the route's timeout ran out", http.StatusGatewayTimeout)
	case r.Context().Err() != nil:
		// The client went away: nobody to answer. 499 as nginx logs it.
		if lw, ok := w.(*logWriter); ok {
			lw.status = 499
		}
	default:
		status, text := upstream.GatewayError(err)
		http.Error(w, text, status)
	}
}

// finish logs and counts a request.
func (p *Proxy) finish(w *logWriter, r *http.Request, req *request, start time.Time) {
	d := time.Since(start)
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	p.metrics.observe(req.route, req.up, status, d)
	if p.log != nil {
		p.log.write(&logEntry{remote: r.RemoteAddr, method: r.Method, host: r.Host, path: r.URL.Path,
			route: req.route, up: req.up, upstream: req.upstream, id: req.id, status: status, bytes: w.bytes, d: d})
	}
}

// logWriter records what was answered. Unwrap lets the reverse proxy
// reach the connection underneath for flushes and protocol upgrades.
type logWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	// edit, then backendEdit, change the answer's header fields (a
	// Gateway API rule's ResponseHeaderModifier, its backendRef's).
	edit, backendEdit *route.HeaderEdit
}

func (w *logWriter) editHeader() {
	w.edit.Apply(w.Header())
	w.backendEdit.Apply(w.Header())
}

func (w *logWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
		w.editHeader()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *logWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		w.editHeader()
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *logWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
