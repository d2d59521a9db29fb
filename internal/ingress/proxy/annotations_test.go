package proxy

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/ingress/annotations"
	"github.com/svcnet/svcnet/internal/ingress/route"
	"github.com/svcnet/svcnet/internal/ingress/upstream"
)

func TestAnnotations(t *testing.T) {
	a := echo(t, "a")
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	tests := []struct {
		name        string
		annotations map[string]string
		method      string
		path        string
		body        string
		status      int
		uri         string // what the pod received
	}{
		{"rewrite a prefix", map[string]string{"svcnet.dev/rewrite-target": "/v2"}, "GET", "/alpha/items?x=1", "", 200, "/v2/items?x=1"},
		{"rewrite the prefix itself", map[string]string{"svcnet.dev/rewrite-target": "/"}, "GET", "/alpha", "", 200, "/"},
		{"rewrite keeps a trailing slash", map[string]string{"nginx.ingress.kubernetes.io/rewrite-target": "/app"}, "GET", "/alpha/", "", 200, "/app/"},
		{"allowed source", map[string]string{"svcnet.dev/allowlist-source-range": "127.0.0.0/8"}, "GET", "/alpha", "", 200, "/alpha"},
		{"other sources get 403", map[string]string{"svcnet.dev/allowlist-source-range": "10.0.0.0/8,::1/128"}, "GET", "/alpha", "", 403, ""},
		{"body size of the Ingress", map[string]string{"svcnet.dev/proxy-body-size": "10"}, "POST", "/alpha", strings.Repeat("x", 11), 413, ""},
		{"no body limit", map[string]string{"svcnet.dev/proxy-body-size": "0"}, "POST", "/alpha", strings.Repeat("x", 2<<20), 200, "/alpha"},
		{"read timeout of the Ingress", map[string]string{"svcnet.dev/proxy-read-timeout": "200ms"}, "GET", "/slow", "", 504, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, url := setupAnnotated(t, Options{}, map[string][]string{"alpha": {a}, "slow": {slow.Listener.Addr().String()}}, tt.annotations)
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			resp, got := do(t, tt.method, url+tt.path, "app.example", body)
			if resp.StatusCode != tt.status || got.URI != tt.uri {
				t.Fatalf("%d, pod got %q; want %d, %q", resp.StatusCode, got.URI, tt.status, tt.uri)
			}
		})
	}
}

func TestRewritePath(t *testing.T) {
	prefix := func(p string) *route.Route { return &route.Route{Path: p, PathType: networkingv1.PathTypePrefix} }
	tests := []struct {
		rt                   *route.Route
		clean, target, wants string
	}{
		{prefix("/api"), "/api/v1/x", "/", "/v1/x"},
		{prefix("/api/"), "/api/v1", "/v2", "/v2/v1"},
		{prefix("/api"), "/api", "/v2/", "/v2/"},
		{prefix("/"), "/x/y", "/base", "/base/x/y"},
		{prefix("/"), "/", "/base", "/base"},
		{&route.Route{Path: "/exact", PathType: networkingv1.PathTypeExact}, "/exact", "/other", "/other"},
		{&route.Route{}, "/whatever", "/fallback", "/fallback"},
	}
	for _, tt := range tests {
		if got := rewritePath(tt.rt, tt.clean, tt.target); got != tt.wants {
			t.Errorf("%s %s → %s: %s, want %s", tt.rt.Path, tt.clean, tt.target, got, tt.wants)
		}
	}
}

// TestBackendProtocols: HTTPS to a pod with a certificate of its own, and
// HTTP/2 without TLS (gRPC's transport) to an h2c pod, from a client that
// also speaks h2c to the proxy.
func TestBackendProtocols(t *testing.T) {
	protoOf := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "Grpc-Status")
		_ = json.NewEncoder(w).Encode(map[string]any{"pod": r.Proto, "uri": r.RequestURI})
		w.Header().Set("Grpc-Status", "0")
	}
	tlsPod := httptest.NewUnstartedServer(http.HandlerFunc(protoOf))
	tlsPod.EnableHTTP2 = true
	tlsPod.StartTLS()
	t.Cleanup(tlsPod.Close)
	h2cPod := httptest.NewUnstartedServer(http.HandlerFunc(protoOf))
	h2cPod.Config.Protocols = new(http.Protocols)
	h2cPod.Config.Protocols.SetUnencryptedHTTP2(true)
	h2cPod.Start()
	t.Cleanup(h2cPod.Close)
	tests := []struct {
		protocol, addr, want string
	}{
		{"HTTPS", tlsPod.Listener.Addr().String(), "HTTP/1.1"},
		{"GRPCS", tlsPod.Listener.Addr().String(), "HTTP/2.0"},
		{"H2C", h2cPod.Listener.Addr().String(), "HTTP/2.0"},
		{"GRPC", h2cPod.Listener.Addr().String(), "HTTP/2.0"},
	}
	for _, tt := range tests {
		t.Run(tt.protocol, func(t *testing.T) {
			p, _ := setupAnnotated(t, Options{}, map[string][]string{"alpha": {tt.addr}}, map[string]string{"svcnet.dev/backend-protocol": tt.protocol})
			// The proxy's listener speaks h2c as `svcnet ingress` does.
			srv := httptest.NewUnstartedServer(p.Handler(80))
			srv.Config.Protocols = new(http.Protocols)
			srv.Config.Protocols.SetHTTP1(true)
			srv.Config.Protocols.SetUnencryptedHTTP2(true)
			srv.Start()
			t.Cleanup(srv.Close)
			h2c := new(http.Protocols)
			h2c.SetUnencryptedHTTP2(true)
			client := &http.Client{Transport: &http.Transport{Protocols: h2c, DialTLSContext: nil, TLSClientConfig: &tls.Config{}}}
			req, _ := http.NewRequest("POST", srv.URL+"/alpha/svc.Method", strings.NewReader("message"))
			req.Host = "app.example"
			req.Header.Set("Content-Type", "application/grpc")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&got)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.ProtoMajor != 2 || got["pod"] != tt.want || got["uri"] != "/alpha/svc.Method" {
				t.Fatalf("%d over %s: pod saw %v", resp.StatusCode, resp.Proto, got)
			}
			if resp.Trailer.Get("Grpc-Status") != "0" {
				t.Errorf("trailers lost: %v", resp.Trailer)
			}
		})
	}
}

func TestCookieAffinity(t *testing.T) {
	pods := []string{echo(t, "a"), echo(t, "b"), echo(t, "c")}
	p, url := setupAnnotated(t, Options{}, map[string][]string{"alpha": pods}, map[string]string{
		"nginx.ingress.kubernetes.io/affinity": "cookie",
		"svcnet.dev/session-cookie-max-age":    "60",
	})
	get := func(cookie string) (pod string, set *http.Cookie) {
		t.Helper()
		req, _ := http.NewRequest("GET", url+"/alpha", nil)
		req.Host = "app.example"
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "INGRESSCOOKIE", Value: cookie})
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		for _, c := range resp.Cookies() {
			if c.Name == "INGRESSCOOKIE" {
				set = c
			}
		}
		return resp.Header.Get("X-Pod"), set
	}
	// No cookie: round robin, and a cookie for the pod that answered.
	seen := map[string]string{}
	for range 6 {
		pod, c := get("")
		if c == nil || c.MaxAge != 60 || !c.HttpOnly || c.Path != "/" {
			t.Fatalf("cookie %+v", c)
		}
		seen[pod] = c.Value
	}
	if len(seen) != 3 {
		t.Fatalf("without a cookie, pods %v: want round robin over all 3", seen)
	}
	// With a cookie: that pod every time, and no new cookie.
	for pod, value := range seen {
		for range 5 {
			got, c := get(value)
			if got != pod || c != nil {
				t.Fatalf("cookie of %s: answered by %s, new cookie %v", pod, got, c)
			}
		}
	}
	// The pod goes away: another answers and the cookie follows it.
	u := p.cfg.Load().ups[0]
	u.Set(pods[1:])
	got, c := get(seen["a"])
	if got == "a" || c == nil || c.Value != seen[got] {
		t.Fatalf("after pod a left: answered by %s, cookie %v", got, c)
	}
	// A cookie that names nothing is replaced.
	if _, c := get("garbage"); c == nil {
		t.Fatal("no cookie for a client with a stale one")
	}
}

func TestCanaryRules(t *testing.T) {
	tests := []struct {
		name   string
		rule   annotations.Canary
		header string // X-Canary's value
		cookie string // beta's value
		want   float64
	}{
		{"weight only", annotations.Canary{Weight: 30, WeightTotal: 100}, "", "", 0.3},
		{"weight zero", annotations.Canary{WeightTotal: 100}, "", "", 0},
		{"weight total", annotations.Canary{Weight: 100, WeightTotal: 100}, "", "", 1},
		{"header always", annotations.Canary{Header: "X-Canary", WeightTotal: 100}, "always", "", 1},
		{"header never beats the weight", annotations.Canary{Header: "X-Canary", Weight: 100, WeightTotal: 100}, "never", "", 0},
		{"other header values fall through", annotations.Canary{Header: "X-Canary", Weight: 50, WeightTotal: 100}, "maybe", "", 0.5},
		{"header value", annotations.Canary{Header: "X-Canary", HeaderValue: "v2", WeightTotal: 100}, "v2", "", 1},
		{"with a header value, always is not special", annotations.Canary{Header: "X-Canary", HeaderValue: "v2", WeightTotal: 100}, "always", "", 0},
		{"cookie always", annotations.Canary{Cookie: "beta", WeightTotal: 100}, "", "always", 1},
		{"cookie never", annotations.Canary{Cookie: "beta", Weight: 100, WeightTotal: 100}, "", "never", 0},
		{"the header before the cookie", annotations.Canary{Header: "X-Canary", Cookie: "beta", WeightTotal: 100}, "never", "always", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const n = 4000
			hits := 0
			for range n {
				r, _ := http.NewRequest("GET", "http://x/", nil)
				if tt.header != "" {
					r.Header.Set("X-Canary", tt.header)
				}
				if tt.cookie != "" {
					r.AddCookie(&http.Cookie{Name: "beta", Value: tt.cookie})
				}
				if useCanary(r, &tt.rule) {
					hits++
				}
			}
			// Weights within 5 points of their share (4,000 draws: a
			// binomial's standard deviation is under 0.8 points).
			if got := float64(hits) / n; got < tt.want-0.05 || got > tt.want+0.05 {
				t.Errorf("canary share %.3f, want %.2f", got, tt.want)
			}
		})
	}
}

// TestCanaryThroughTheProxy: a canary Ingress by header takes the
// requests that ask for it, the rest stay on the primary.
func TestCanaryThroughTheProxy(t *testing.T) {
	a, b := echo(t, "primary"), echo(t, "canary")
	prefix := ptr.To(networkingv1.PathTypePrefix)
	mk := func(name, svc string, ann map[string]string) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: ann}, Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{Host: "app.example", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: prefix, Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}}
	}
	table, problems := route.Build([]*networkingv1.Ingress{
		mk("main", "v1", nil),
		mk("beta", "v2", map[string]string{"svcnet.dev/canary": "true", "svcnet.dev/canary-by-header": "X-Beta"}),
	})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	var ups []*upstream.Upstream
	for _, ref := range table.Backends {
		u := upstream.New(ref)
		u.Set(map[string][]string{"v1": {a}, "v2": {b}}[ref.Name])
		ups = append(ups, u)
	}
	p := New(Options{})
	p.Set(table, ups)
	srv := httptest.NewServer(p.Handler(80))
	t.Cleanup(func() { srv.Close(); p.Close() })
	for _, c := range []struct{ header, want string }{{"", "primary"}, {"always", "canary"}, {"never", "primary"}} {
		for range 5 {
			var hdr []string
			if c.header != "" {
				hdr = []string{"X-Beta", c.header}
			}
			if resp, _ := do(t, "GET", srv.URL+"/", "app.example", nil, hdr...); resp.Header.Get("X-Pod") != c.want {
				t.Fatalf("X-Beta %q: answered by %q, want %q", c.header, resp.Header.Get("X-Pod"), c.want)
			}
		}
	}
}
