package proxy

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/freeport"
)

// FuzzHandler sends requests with fuzzed hosts, paths, queries and
// headers through the proxy to a pod that is gone: nothing panics, and
// the answer is one the proxy gives (no route, bad path, refused pod,
// redirect, body limits), never a 200 it could not have had.
func FuzzHandler(f *testing.F) {
	f.Add("app.example", "/alpha/../beta", "q=1", "X-Forwarded-For", "1.2.3.4", "POST", "body")
	f.Add("APP.example:8080", "//alpha//x/./y", "", "Cookie", "INGRESSCOOKIE=zz", "GET", "")
	f.Add("[::1]", "/%2e%2e/alpha", "a=%zz", "Connection", "X-Real-IP", "HEAD", "")
	f.Add("", "*", "", "Content-Length", "-1", "OPTIONS", "")
	f.Fuzz(func(t *testing.T, host, path, query, hk, hv, method, body string) {
		if !validMethod(method) {
			method = "GET"
		}
		p := fuzzProxy(t)
		u := &url.URL{Scheme: "http", Host: "proxy", Path: path, RawQuery: query}
		r := httptest.NewRequest(http.MethodGet, "http://proxy/", strings.NewReader(body))
		r.Method, r.URL, r.Host, r.RequestURI = method, u, host, u.RequestURI()
		if hk != "" && http.CanonicalHeaderKey(hk) != "" && !strings.ContainsAny(hk+hv, "\r\n\x00:") {
			r.Header.Set(hk, hv)
		}
		w := httptest.NewRecorder()
		p.Handler(80).ServeHTTP(w, r)
		switch w.Code {
		case http.StatusNotFound, http.StatusBadRequest, http.StatusBadGateway, http.StatusPermanentRedirect,
			http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		default:
			t.Fatalf("%s %q %q (host %q): status %d", method, path, query, host, w.Code)
		}
	})
}

var fuzzed *Proxy

// fuzzProxy is one proxy for every input: routes to two backends whose
// only pod refuses connections.
func fuzzProxy(t *testing.T) *Proxy {
	if fuzzed != nil {
		return fuzzed
	}
	p, _ := setup(t, Options{MaxBodyBytes: 100}, map[string][]string{"alpha": {freeport.Addr(t)}, "beta": {freeport.Addr(t)}, "empty": nil})
	// Kept for the whole run: the first test's cleanup must not close it.
	fuzzed = New(Options{MaxBodyBytes: 100})
	fuzzed.Set(p.cfg.Load().router, p.cfg.Load().ups)
	return fuzzed
}

func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for i := 0; i < len(m); i++ {
		if c := m[i]; c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}
