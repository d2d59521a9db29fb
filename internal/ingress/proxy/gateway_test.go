package proxy

import (
	"cmp"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/ingress/route"
	"github.com/svcnet/svcnet/internal/ingress/upstream"
)

// funcRouter is a Gateway's router as the proxy sees it.
type funcRouter func(r *route.Request) *route.Route

func (f funcRouter) Route(r *route.Request) *route.Route { return f(r) }
func (f funcRouter) BackendRefs() []route.BackendRef     { return nil }

// TestGatewayPort serves the Ingress rules on one port and a Gateway's
// router on another, through the engine and net/http as the ingress
// serves them: the port decides the router, and a Gateway rule's header
// edits, fixed answers and redirects are applied.
func TestGatewayPort(t *testing.T) {
	table, ups := routes(t, map[string][]string{"alpha": {echo(t, "a")}}, nil)
	alpha := table.Backends[0]
	mirrored := make(chan string, 4)
	mirror := upstream.New(route.BackendRef{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "mirror"}, Port: 80})
	mirrorSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mirrored <- r.Method + " " + r.Host + r.RequestURI + " " + r.Header.Get("X-Set") + " " + string(body)
	}))
	t.Cleanup(mirrorSrv.Close)
	mirror.Set([]string{mirrorSrv.Listener.Addr().String()})
	slow := upstream.New(route.BackendRef{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "slow"}, Port: 80})
	slow.Set([]string{rawPod(t, func(c net.Conn) { time.Sleep(2 * time.Second) })})
	ups = append(ups, slow, mirror)
	backends := append(slices.Clone(table.Backends), slow.Ref, mirror.Ref)
	var gotQuery string
	gw := funcRouter(func(r *route.Request) *route.Route {
		if r.Query != nil {
			gotQuery = r.Query()
		}
		nn := alpha.NamespacedName
		switch r.Path {
		case "/plain":
			return &route.Route{Ingress: nn, Backend: 0}
		case "/headers":
			return &route.Route{Ingress: nn, Backend: 0, HTTPRule: &route.HTTPRule{
				RequestHeaders:  &route.HeaderEdit{Set: []route.Header{{Name: "X-Set", Value: "set"}}, Add: []route.Header{{Name: "X-Added", Value: "added"}}, Remove: []string{"X-Drop"}},
				ResponseHeaders: &route.HeaderEdit{Set: []route.Header{{Name: "X-Pod", Value: "hidden"}}, Add: []route.Header{{Name: "X-Resp", Value: "r"}}},
			}}
		case "/answer":
			return &route.Route{Ingress: nn, Backend: -1, Answer: http.StatusInternalServerError}
		case "/redirect":
			return &route.Route{Ingress: nn, Backend: -1, HTTPRule: &route.HTTPRule{Redirect: &route.Redirect{Scheme: "https", Hostname: "moved.example", Status: http.StatusMovedPermanently}}}
		case "/rewrite/x":
			return &route.Route{Ingress: nn, Backend: 0, HTTPRule: &route.HTTPRule{Rewrite: &route.Rewrite{Hostname: "inner.example",
				Path: &route.PathModifier{Prefix: "/rewrite", Replace: "/new"}}}}
		case "/moved/x":
			return &route.Route{Ingress: nn, Backend: -1, HTTPRule: &route.HTTPRule{Redirect: &route.Redirect{Status: http.StatusSeeOther,
				Path: &route.PathModifier{Full: "/else", IsFull: true}}}}
		case "/mirrored":
			return &route.Route{Ingress: nn, Backend: 0, HTTPRule: &route.HTTPRule{Mirrors: []route.Mirror{{Backend: 2, Fraction: 1}},
				RequestHeaders: &route.HeaderEdit{Set: []route.Header{{Name: "X-Set", Value: "set"}}}}}
		case "/cors":
			return &route.Route{Ingress: nn, Backend: 0, HTTPRule: &route.HTTPRule{CORS: &route.CORS{
				AllowOrigins: []string{"https://*.foo.example"}, AllowMethods: []string{"GET", "PUT"}, ExposeHeaders: []string{"X-Pod"}, MaxAge: 60}}}
		case "/slow":
			return &route.Route{Ingress: nn, Backend: 1, HTTPRule: &route.HTTPRule{Timeout: 200 * time.Millisecond}}
		case "/redirect-port":
			return &route.Route{Ingress: nn, Backend: -1, HTTPRule: &route.HTTPRule{Redirect: &route.Redirect{Port: 8443, Status: http.StatusFound}}}
		}
		return nil
	})
	p := New(Options{})
	t.Cleanup(p.Close)
	p.Set(&route.Mux{Default: table, ByPort: map[int]route.Router{20000: gw}, Backends: backends}, ups)
	ing := "http://" + serveEngine(t, p, 8080).addr
	gwURL := "http://" + serveEngine(t, p, 20000).addr

	tests := []struct {
		name, url, host string
		method, body    string
		hdr             []string
		status          int
		pod             string
		check           func(t *testing.T, resp *http.Response, got received)
	}{
		{name: "ingress port: Ingress rules", url: ing + "/alpha", host: "app.example", status: 200, pod: "a"},
		{name: "ingress port: not the Gateway's", url: ing + "/plain", host: "app.example", status: 404},
		{name: "gateway port: not the Ingress's", url: gwURL + "/alpha", host: "app.example", status: 404},
		{name: "gateway port: plain", url: gwURL + "/plain?x=1&y=2", host: "any.example", status: 200, pod: "a",
			check: func(t *testing.T, _ *http.Response, _ received) {
				if gotQuery != "x=1&y=2" {
					t.Errorf("the router got query %q", gotQuery)
				}
			}},
		{name: "header edits", url: gwURL + "/headers", host: "any.example", hdr: []string{"X-Set", "old", "X-Added", "first", "X-Drop", "x"}, status: 200, pod: "a",
			check: func(t *testing.T, resp *http.Response, got received) {
				if got.Headers["X-Set"] != "set" || got.Headers["X-Drop"] != "" {
					t.Errorf("the pod got %v", got.Headers)
				}
				if resp.Header.Get("X-Pod") != "hidden" || resp.Header.Get("X-Resp") != "r" {
					t.Errorf("the client got %v", resp.Header)
				}
			}},
		{name: "fixed answer", url: gwURL + "/answer", host: "any.example", status: 500},
		{name: "redirect", url: gwURL + "/redirect?q=1", host: "old.example:8080", status: 301,
			check: func(t *testing.T, resp *http.Response, _ received) {
				if l := resp.Header.Get("Location"); l != "https://moved.example/redirect?q=1" {
					t.Errorf("Location %q", l)
				}
			}},
		{name: "rewrite", url: gwURL + "/rewrite/x?q=1", host: "any.example", status: 200, pod: "a",
			check: func(t *testing.T, _ *http.Response, got received) {
				if got.URI != "/new/x?q=1" || got.Host != "inner.example" {
					t.Errorf("the pod got %s for %s", got.URI, got.Host)
				}
			}},
		{name: "redirect with a path", url: gwURL + "/moved/x?q=1", host: "any.example", status: 303,
			check: func(t *testing.T, resp *http.Response, _ received) {
				if l := resp.Header.Get("Location"); l != "http://any.example/else?q=1" {
					t.Errorf("Location %q", l)
				}
			}},
		{name: "mirrored", url: gwURL + "/mirrored?q=1", host: "any.example", status: 200, pod: "a",
			check: func(t *testing.T, _ *http.Response, _ received) {
				select {
				case got := <-mirrored:
					if got != "GET any.example/mirrored?q=1 set " {
						t.Errorf("the mirror got %q", got)
					}
				case <-time.After(5 * time.Second):
					t.Error("nothing mirrored")
				}
			}},
		{name: "mirrored with its body", method: "POST", body: "hello", url: gwURL + "/mirrored", host: "any.example", status: 200, pod: "a",
			check: func(t *testing.T, _ *http.Response, got received) {
				if got.Body != "hello" {
					t.Errorf("the backend got body %q", got.Body)
				}
				select {
				case got := <-mirrored:
					if got != "POST any.example/mirrored set hello" {
						t.Errorf("the mirror got %q", got)
					}
				case <-time.After(5 * time.Second):
					t.Error("nothing mirrored")
				}
			}},
		{name: "CORS preflight", method: "OPTIONS", url: gwURL + "/cors", host: "any.example",
			hdr: []string{"Origin", "https://a.foo.example", "Access-Control-Request-Method", "PUT"}, status: 204,
			check: func(t *testing.T, resp *http.Response, _ received) {
				if resp.Header.Get("Access-Control-Allow-Origin") != "https://a.foo.example" || resp.Header.Get("Access-Control-Allow-Methods") != "GET, PUT" ||
					resp.Header.Get("Access-Control-Max-Age") != "60" {
					t.Errorf("headers %v", resp.Header)
				}
			}},
		{name: "CORS preflight from another origin", method: "OPTIONS", url: gwURL + "/cors", host: "any.example",
			hdr: []string{"Origin", "https://foo.example", "Access-Control-Request-Method", "PUT"}, status: 204,
			check: func(t *testing.T, resp *http.Response, _ received) {
				if v := resp.Header.Get("Access-Control-Allow-Origin"); v != "" {
					t.Errorf("allowed origin %q", v)
				}
			}},
		{name: "CORS request", url: gwURL + "/cors", host: "any.example", hdr: []string{"Origin", "https://a.foo.example"}, status: 200, pod: "a",
			check: func(t *testing.T, resp *http.Response, _ received) {
				if resp.Header.Get("Access-Control-Allow-Origin") != "https://a.foo.example" || resp.Header.Get("Access-Control-Expose-Headers") != "X-Pod" {
					t.Errorf("headers %v", resp.Header)
				}
			}},
		{name: "the route's timeout", url: gwURL + "/slow", host: "any.example", status: 504},
		{name: "redirect to a port", url: gwURL + "/redirect-port", host: "old.example", status: 302,
			check: func(t *testing.T, resp *http.Response, _ received) {
				if l := resp.Header.Get("Location"); l != "http://old.example:8443/redirect-port" {
					t.Errorf("Location %q", l)
				}
			}},
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			saved := http.DefaultClient
			http.DefaultClient = noRedirect
			defer func() { http.DefaultClient = saved }()
			method := cmp.Or(tt.method, "GET")
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			resp, got := do(t, method, tt.url, tt.host, body, tt.hdr...)
			if resp.StatusCode != tt.status || got.Pod != tt.pod {
				t.Fatalf("%d from %q, want %d from %q", resp.StatusCode, got.Pod, tt.status, tt.pod)
			}
			if tt.check != nil {
				tt.check(t, resp, got)
			}
		})
	}
}
