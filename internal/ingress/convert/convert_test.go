package convert

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ingress is the YAML of an Ingress in namespace ns: annotations as
// "key: value" lines, spec as YAML indented by two.
func ingress(ns, name string, annotations []string, spec string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: %s\n  namespace: %s\n", name, ns)
	if len(annotations) > 0 {
		b.WriteString("  annotations:\n")
		for _, a := range annotations {
			k, v, _ := strings.Cut(a, ": ")
			fmt.Fprintf(&b, "    %s: %q\n", k, v)
		}
	}
	b.WriteString("spec:\n" + spec + "\n---\n")
	return b.String()
}

// rule is a spec's rules with one host (or none: "") and its paths,
// each "TYPE PATH SERVICE:PORT" (PORT a number or a name).
func rule(host string, paths ...string) string {
	var b strings.Builder
	b.WriteString("  rules:\n  - ")
	if host != "" {
		fmt.Fprintf(&b, "host: %q\n    ", host)
	}
	b.WriteString("http:\n      paths:\n")
	for _, p := range paths {
		f := strings.Fields(p)
		svc, port, _ := strings.Cut(f[2], ":")
		portField := "number: " + port
		if port[0] < '0' || port[0] > '9' {
			portField = "name: " + port
		}
		fmt.Fprintf(&b, "      - path: %q\n        pathType: %s\n        backend:\n          service:\n            name: %s\n            port:\n              %s\n", f[1], f[0], svc, portField)
	}
	return b.String()
}

func tls(secret string, hosts ...string) string {
	return fmt.Sprintf("  tls:\n  - hosts: [%s]\n    secretName: %s\n", strings.Join(hosts, ", "), secret)
}

func defaultBackend(svc string, port int) string {
	return fmt.Sprintf("  defaultBackend:\n    service:\n      name: %s\n      port:\n        number: %d\n", svc, port)
}

const service = `apiVersion: v1
kind: Service
metadata:
  name: named
  namespace: ns
spec:
  ports:
  - name: web
    port: 8080
  - name: grpc
    port: 9000
    appProtocol: kubernetes.io/h2c
---
`

// convertYAML converts the Ingresses of a YAML stream, with its
// Services as the lookup.
func convertYAML(t *testing.T, in string, o Options) (*Result, []byte, error) {
	t.Helper()
	var m Manifest
	if err := m.Decode(strings.NewReader(in), "test", "ns"); err != nil {
		t.Fatal(err)
	}
	if o.Services == nil {
		o.Services = m.Lookup
	}
	res, err := Convert(m.Ingresses, o)
	if err != nil {
		return nil, nil, err
	}
	checkCarried(t, m.Ingresses, res)
	var out bytes.Buffer
	if err := Write(&out, res); err != nil {
		t.Fatal(err)
	}
	return res, out.Bytes(), nil
}

func route(res *Result, name string) *gatewayv1.HTTPRoute {
	for _, r := range res.HTTPRoutes {
		if r.Name == name {
			return r
		}
	}
	return nil
}

func routeNames(res *Result) []string {
	var out []string
	for _, r := range res.HTTPRoutes {
		out = append(out, r.Namespace+"/"+r.Name)
	}
	return out
}

// match is a rule's first match, as "TYPE VALUE [HEADER=VALUE…]".
func match(r gatewayv1.HTTPRouteRule) string {
	m := r.Matches[0]
	s := fmt.Sprintf("%s %s", *m.Path.Type, *m.Path.Value)
	for _, h := range m.Headers {
		s += fmt.Sprintf(" %s=%s", h.Name, h.Value)
	}
	return s
}

// backends are a rule's backendRefs as "NAME:PORT[*WEIGHT]".
func backends(r gatewayv1.HTTPRouteRule) string {
	var out []string
	for _, b := range r.BackendRefs {
		s := fmt.Sprintf("%s:%d", b.Name, *b.Port)
		if b.Weight != nil {
			s += fmt.Sprintf("*%d", *b.Weight)
		}
		out = append(out, s)
	}
	return strings.Join(out, ",")
}

// rules are a route's rules as "MATCH -> BACKENDS [FILTER…]".
func rules(r *gatewayv1.HTTPRoute) []string {
	if r == nil {
		return []string{"no route"}
	}
	var out []string
	for _, ru := range r.Spec.Rules {
		s := match(ru) + " -> " + backends(ru)
		for _, f := range ru.Filters {
			switch {
			case f.URLRewrite != nil && f.URLRewrite.Path.Type == gatewayv1.FullPathHTTPPathModifier:
				s += " full:" + *f.URLRewrite.Path.ReplaceFullPath
			case f.URLRewrite != nil:
				s += " prefix:" + *f.URLRewrite.Path.ReplacePrefixMatch
			case f.RequestRedirect != nil:
				s += fmt.Sprintf(" redirect:%s:%d", *f.RequestRedirect.Scheme, *f.RequestRedirect.StatusCode)
			case f.CORS != nil:
				s += " cors"
			}
		}
		if ru.Timeouts != nil {
			s += " timeout:" + string(*ru.Timeouts.BackendRequest)
		}
		out = append(out, s)
	}
	return out
}

func parents(r *gatewayv1.HTTPRoute) []string {
	var out []string
	for _, p := range r.Spec.ParentRefs {
		s := string(*p.SectionName)
		if p.Namespace != nil {
			s = string(*p.Namespace) + "/" + s
		}
		out = append(out, s)
	}
	return out
}

func noteLines(res *Result) []string {
	var out []string
	for _, n := range res.Notes {
		out = append(out, n.String())
	}
	return out
}

// TestConvert: each conversion and each refusal, on the objects made
// (every output is also held to the CRDs, as the golden files are).
func TestConvert(t *testing.T) {
	crds := loadCRDs(t)
	tests := []struct {
		name  string
		in    string
		o     Options
		err   string
		notes []string // each a substring of one Note, in this order
		check func(t *testing.T, res *Result)
	}{
		{
			name:  "path types",
			in:    ingress("ns", "a", nil, rule("a.example.com", "Prefix /api/ api:80", "Exact /x x:81", "ImplementationSpecific /static static:82", "Prefix / root:83")),
			notes: []string{`note: ns/a: ImplementationSpecific path "/static" is PathPrefix /static, by whole path elements: /static/x matches it, /staticx no longer does`},
			check: func(t *testing.T, res *Result) {
				want := []string{"PathPrefix /api -> api:80", "Exact /x -> x:81", "PathPrefix /static -> static:82", "PathPrefix / -> root:83"}
				if got := rules(route(res, "a")); !slices.Equal(got, want) {
					t.Errorf("rules %q, want %q", got, want)
				}
				if got := parents(route(res, "a")); !slices.Equal(got, []string{"http"}) {
					t.Errorf("parents %q", got)
				}
			},
		},
		{
			name:  "no path type is ImplementationSpecific",
			in:    strings.Replace(ingress("ns", "a", nil, rule("", "Prefix /app app:80")), "        pathType: Prefix\n", "", 1),
			notes: []string{`ImplementationSpecific path "/app" is PathPrefix /app`},
		},
		{
			name: "default backend fills the hosts' unmatched paths",
			in:   ingress("ns", "a", nil, defaultBackend("def", 80)+rule("a.example.com", "Exact /x x:80")),
			check: func(t *testing.T, res *Result) {
				want := []string{"Exact /x -> x:80", "PathPrefix / -> def:80"}
				if got := rules(route(res, "a")); !slices.Equal(got, want) {
					t.Errorf("rules %q, want %q", got, want)
				}
			},
		},
		{
			name: "default backend not where the host has /",
			in:   ingress("ns", "a", nil, defaultBackend("def", 80)+rule("a.example.com", "Prefix / root:80")),
			check: func(t *testing.T, res *Result) {
				if got := rules(route(res, "a")); !slices.Equal(got, []string{"PathPrefix / -> root:80"}) {
					t.Errorf("rules %q", got)
				}
			},
		},
		{
			name: "default backend alone is the catch-all",
			in:   ingress("ns", "a", nil, defaultBackend("def", 80)),
			check: func(t *testing.T, res *Result) {
				r := route(res, "a")
				if got := rules(r); !slices.Equal(got, []string{"PathPrefix / -> def:80"}) || len(r.Spec.Hostnames) != 0 {
					t.Errorf("rules %q, hostnames %v", got, r.Spec.Hostnames)
				}
			},
		},
		{
			name: "another Ingress's / beats a default backend, whatever their age",
			in: ingress("ns", "a", nil, defaultBackend("def", 80)+rule("h.example.com", "Exact /x x:80")) +
				ingress("ns", "b", nil, rule("h.example.com", "Prefix / root:80")),
			notes: []string{"left out: ns/a: the defaultBackend for host h.example.com: the Ingress ns/b serves its path /"},
			check: func(t *testing.T, res *Result) {
				if got := rules(route(res, "a")); !slices.Equal(got, []string{"Exact /x -> x:80"}) {
					t.Errorf("rules %q", got)
				}
			},
		},
		{
			name:  "two Ingresses with one path",
			in:    ingress("ns", "a", nil, rule("h.example.com", "Prefix /x a:80")) + ingress("ns", "b", nil, rule("h.example.com", "Prefix /x/ b:80")),
			notes: []string{`note: ns/b: path "/x/" of host h.example.com is the older Ingress ns/a's too`},
		},
		{
			name: "named port resolved from the Service",
			in:   service + ingress("ns", "a", nil, rule("", "Prefix / named:web")),
			check: func(t *testing.T, res *Result) {
				if got := rules(route(res, "a")); !slices.Equal(got, []string{"PathPrefix / -> named:8080"}) {
					t.Errorf("rules %q", got)
				}
			},
		},
		{
			name:  "named port of an unknown Service",
			in:    ingress("ns", "a", nil, rule("", "Prefix / other:web", "Prefix /b b:80")),
			notes: []string{`left out: ns/a: path "/" of every host: the Gateway API takes port numbers, and port "web" of Service ns/other cannot be resolved to one: the Service is not among those read (with -f, give it too)`},
			check: func(t *testing.T, res *Result) {
				if got := rules(route(res, "a")); !slices.Equal(got, []string{"PathPrefix /b -> b:80"}) {
					t.Errorf("rules %q", got)
				}
			},
		},
		{
			name:  "named port the Service does not have",
			in:    service + ingress("ns", "a", nil, rule("", "Prefix / named:admin")),
			notes: []string{`left out: ns/a: path "/" of every host: Service ns/named has no port named "admin"`, "nothing of it could be converted: no HTTPRoute"},
		},
		{
			name: "resource backend",
			in: ingress("ns", "a", nil, `  rules:
  - http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          resource:
            kind: Bucket
            name: b
`),
			notes: []string{"its backend is a Bucket, which has no Gateway API equivalent"},
		},
		{
			name: "TLS host redirects plain HTTP with a 308",
			in:   ingress("ns", "a", nil, tls("a-tls", "a.example.com")+rule("a.example.com", "Prefix /x x:80", "Exact /why why:80")),
			check: func(t *testing.T, res *Result) {
				if got := parents(route(res, "a")); !slices.Equal(got, []string{"https-a-example-com"}) {
					t.Errorf("parents %q", got)
				}
				r := route(res, "a-ssl-redirect")
				if got := parents(r); !slices.Equal(got, []string{"http"}) {
					t.Errorf("redirect's parents %q", got)
				}
				if got := rules(r); !slices.Equal(got, []string{"PathPrefix /x ->  redirect:https:308"}) || len(r.Spec.Rules[0].Matches) != 2 {
					t.Errorf("redirect's rules %q, matches %s", got, mustJSON(r.Spec.Rules[0].Matches))
				}
			},
		},
		{
			name: "ssl-redirect false serves both",
			in:   ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/ssl-redirect: false"}, tls("a-tls", "a.example.com")+rule("a.example.com", "Prefix / x:80")),
			check: func(t *testing.T, res *Result) {
				if got := parents(route(res, "a")); !slices.Equal(got, []string{"http", "https-a-example-com"}) || route(res, "a-ssl-redirect") != nil {
					t.Errorf("parents %q, routes %q", got, routeNames(res))
				}
			},
		},
		{
			name: "another Ingress's certificate redirects too",
			in: ingress("ns", "a", nil, tls("a-tls", "h.example.com")+rule("h.example.com", "Prefix /a a:80")) +
				ingress("ns", "b", nil, rule("h.example.com", "Prefix /b b:80")),
			check: func(t *testing.T, res *Result) {
				if route(res, "b-ssl-redirect") == nil || !slices.Equal(parents(route(res, "b")), []string{"https-h-example-com"}) {
					t.Errorf("routes %q", routeNames(res))
				}
			},
		},
		{
			name: "a wildcard certificate covers a host",
			in:   ingress("ns", "a", nil, tls("w-tls", `"*.example.com"`)+rule("a.example.com", "Prefix / a:80")),
			check: func(t *testing.T, res *Result) {
				if got := parents(route(res, "a")); !slices.Equal(got, []string{"https-wildcard-example-com"}) {
					t.Errorf("parents %q", got)
				}
			},
		},
		{
			name: "force-ssl-redirect with a certificate",
			in: ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/force-ssl-redirect: true", "nginx.ingress.kubernetes.io/ssl-redirect: false"},
				tls("a-tls", "a.example.com")+rule("a.example.com", "Prefix / a:80")),
			check: func(t *testing.T, res *Result) {
				if route(res, "a-ssl-redirect") == nil || !slices.Equal(parents(route(res, "a")), []string{"https-a-example-com"}) {
					t.Errorf("routes %q", routeNames(res))
				}
			},
		},
		{
			name:  "force-ssl-redirect without a certificate",
			in:    ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/force-ssl-redirect: true"}, rule("a.example.com", "Prefix / a:80")),
			notes: []string{"note: nginx.ingress.kubernetes.io/force-ssl-redirect on ns/a: host a.example.com: no spec.tls, so no HTTPS listener here"},
			check: func(t *testing.T, res *Result) {
				if got := rules(route(res, "a")); !slices.Equal(got, []string{"PathPrefix / X-Forwarded-Proto=https -> a:80"}) {
					t.Errorf("rules %q", got)
				}
				if got := rules(route(res, "a-ssl-redirect")); !slices.Equal(got, []string{"PathPrefix / ->  redirect:https:308"}) {
					t.Errorf("redirect's rules %q", got)
				}
			},
		},
		{
			name:  "TLS without a Secret",
			in:    ingress("ns", "a", nil, "  tls:\n  - hosts: [a.example.com]\n"+rule("a.example.com", "Prefix / a:80")),
			notes: []string{"left out: ns/a: spec.tls[0] names no Secret for host a.example.com"},
			check: func(t *testing.T, res *Result) {
				if len(res.Gateway.Spec.Listeners) != 1 || !slices.Equal(parents(route(res, "a")), []string{"http"}) {
					t.Errorf("listeners %s", mustJSON(res.Gateway.Spec.Listeners))
				}
			},
		},
		{
			name: "TLS host claimed twice",
			in: ingress("ns", "a", nil, tls("a-tls", "h.example.com")+rule("h.example.com", "Prefix / a:80")) +
				ingress("ns", "b", nil, tls("b-tls", "h.example.com")+rule("h.example.com", "Prefix /b b:80")),
			notes: []string{"left out: ns/b: spec.tls[0] host h.example.com: the Secret ns/a-tls of an older Ingress serves it; b-tls is not used"},
		},
		{
			name: "rewrite: a prefix stripped",
			in:   ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/rewrite-target: /$2"}, rule("", "ImplementationSpecific /app(/|$)(.*) a:80", "Prefix /(.*) b:80")),
			notes: []string{
				`not carried over: nginx.ingress.kubernetes.io/rewrite-target on ns/a: every host: "/$2" is not a prefix replacement, which for this path is TARGET/$1`,
				"ingress-nginx read the Ingress's paths as regular expressions",
			},
			check: func(t *testing.T, res *Result) {
				if got := rules(route(res, "a")); !slices.Equal(got, []string{"PathPrefix /app -> a:80 prefix:/"}) {
					t.Errorf("rules %q", got)
				}
			},
		},
		{
			name:  "rewrite: a prefix replaced",
			in:    ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/rewrite-target: /new/$2"}, rule("", "ImplementationSpecific /old(/|$)(.*) a:80")),
			notes: []string{`rewrite-target "/new/$2": a request for the prefix alone, with no slash after it, is sent as /new (ingress-nginx sent /new/)`},
			check: func(t *testing.T, res *Result) {
				if got := rules(route(res, "a")); !slices.Equal(got, []string{"PathPrefix /old -> a:80 prefix:/new"}) {
					t.Errorf("rules %q", got)
				}
			},
		},
		{
			name:  "rewrite: the rest after a slash",
			in:    ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/rewrite-target: /$1"}, rule("", `ImplementationSpecific /api\/v1/(.*) a:80`)),
			notes: []string{`path "/api\\/v1/(.*)" is PathPrefix /api/v1: /api/v1 itself matches too`},
			check: func(t *testing.T, res *Result) {
				if got := rules(route(res, "a")); !slices.Equal(got, []string{"PathPrefix /api/v1 -> a:80 prefix:/"}) {
					t.Errorf("rules %q", got)
				}
			},
		},
		{
			name:  "rewrite: a regular expression with no prefix form",
			in:    ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/rewrite-target: /$1"}, rule("", "ImplementationSpecific /(img|css)/(.*) a:80")),
			notes: []string{`not carried over: nginx.ingress.kubernetes.io/rewrite-target on ns/a: every host: path "/(img|css)/(.*)" is a regular expression to ingress-nginx that no Gateway API path match stands for`},
		},
		{
			name:  "rewrite: a target with a query",
			in:    ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/rewrite-target: /index.php?page=$2"}, rule("", "ImplementationSpecific /p(/|$)(.*) a:80")),
			notes: []string{`"/index.php?page=$2" is not a prefix replacement`},
		},
		{
			name:  "rewrite: no groups replaces the whole path",
			in:    ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/rewrite-target: /"}, defaultBackend("def", 80)+rule("h.example.com", "Prefix /app a:80")),
			notes: []string{`note: nginx.ingress.kubernetes.io/rewrite-target on ns/a: "/" replaces the whole path (ReplaceFullPath), as ingress-nginx does`},
			check: func(t *testing.T, res *Result) {
				if got := rules(route(res, "a")); !slices.Equal(got, []string{"PathPrefix /app -> a:80 full:/", "PathPrefix / -> def:80 full:/"}) {
					t.Errorf("rules %q", got)
				}
			},
		},
		{
			name: "rewrite: svcnet's replaces the matched prefix",
			in:   ingress("ns", "a", []string{"svcnet.dev/rewrite-target: /v2"}, rule("", "Prefix /api a:80", "Exact /api/x a:80")),
			check: func(t *testing.T, res *Result) {
				if got := rules(route(res, "a")); !slices.Equal(got, []string{"PathPrefix /api -> a:80 prefix:/v2", "Exact /api/x -> a:80 full:/v2"}) {
					t.Errorf("rules %q", got)
				}
				if len(res.Notes) != 0 {
					t.Errorf("notes %q", noteLines(res))
				}
			},
		},
		{
			name:  "use-regex with a literal path",
			in:    ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/use-regex: true"}, rule("", `Prefix /v1\.0/x a:80`)),
			notes: []string{"note: nginx.ingress.kubernetes.io/use-regex on ns/a: ingress-nginx read the Ingress's paths as regular expressions"},
			check: func(t *testing.T, res *Result) {
				if got := rules(route(res, "a")); !slices.Equal(got, []string{"PathPrefix /v1.0/x -> a:80"}) {
					t.Errorf("rules %q", got)
				}
			},
		},
		{
			name:  "a path the Gateway API does not take",
			in:    ingress("ns", "a", nil, rule("", "ImplementationSpecific /a//b a:80")),
			notes: []string{`left out: ns/a: every host: path "/a//b" is not one the Gateway API takes (it contains //)`},
		},
		{
			name: "canary by weight and header",
			in: ingress("ns", "main", nil, rule("h.example.com", "Prefix / main:80")) +
				ingress("ns", "canary", []string{"nginx.ingress.kubernetes.io/canary: true", "nginx.ingress.kubernetes.io/canary-weight: 30",
					"nginx.ingress.kubernetes.io/canary-by-header: X-Beta"}, rule("h.example.com", "Prefix / next:80")),
			check: func(t *testing.T, res *Result) {
				want := []string{"PathPrefix / -> main:80*70,next:80*30", "PathPrefix / X-Beta=always -> next:80", "PathPrefix / X-Beta=never -> main:80"}
				if got := rules(route(res, "main")); !slices.Equal(got, want) {
					t.Errorf("rules %q, want %q", got, want)
				}
				if route(res, "canary") != nil {
					t.Error("the canary has a route of its own")
				}
			},
		},
		{
			name: "canary by header value only",
			in: ingress("ns", "main", nil, rule("", "Exact /x main:80")) +
				ingress("ns", "canary", []string{"nginx.ingress.kubernetes.io/canary: true", "nginx.ingress.kubernetes.io/canary-by-header: X-Beta",
					"nginx.ingress.kubernetes.io/canary-by-header-value: yes"}, rule("", "Exact /x next:80")),
			check: func(t *testing.T, res *Result) {
				want := []string{"Exact /x -> main:80", "Exact /x X-Beta=yes -> next:80"}
				if got := rules(route(res, "main")); !slices.Equal(got, want) {
					t.Errorf("rules %q, want %q", got, want)
				}
			},
		},
		{
			name: "canaries refused",
			in: ingress("ns", "main", nil, rule("", "Prefix / main:80")) +
				ingress("ns", "c1", []string{"nginx.ingress.kubernetes.io/canary: true", "nginx.ingress.kubernetes.io/canary-weight: 10"}, rule("", "Prefix / c1:80", "Prefix /new c1:80")) +
				ingress("ns", "c2", []string{"nginx.ingress.kubernetes.io/canary: true", "nginx.ingress.kubernetes.io/canary-weight: 10"}, rule("", "Prefix / c2:80")) +
				ingress("ns", "c3", []string{"nginx.ingress.kubernetes.io/canary: true", "nginx.ingress.kubernetes.io/canary-by-cookie: beta",
					"nginx.ingress.kubernetes.io/canary-by-header-value: x"}, rule("", "Prefix / c3:80")) +
				ingress("ns", "c4", []string{"nginx.ingress.kubernetes.io/canary: true", "nginx.ingress.kubernetes.io/canary-weight: 120"}, rule("", "Prefix / c4:80")),
			notes: []string{
				`left out: ns/c1: path "/new" of every host: no other Ingress serves it, so neither does its canary`,
				`left out: ns/c2: path "/" of every host already has the older canary ns/c1`,
				"not carried over: nginx.ingress.kubernetes.io/canary-by-cookie on ns/c3: the Gateway API matches no cookies",
				"not carried over: nginx.ingress.kubernetes.io/canary-by-header-value on ns/c3: no effect without canary-by-header",
				"left out: ns/c3: nothing sends requests to this canary",
				"not carried over: nginx.ingress.kubernetes.io/canary-weight on ns/c4: 120 is more than the total weight 100",
				"left out: ns/c4: nothing sends requests to this canary",
			},
		},
		{
			name: "timeouts",
			in: ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/proxy-read-timeout: 3600", "nginx.ingress.kubernetes.io/proxy-send-timeout: 1.5s"},
				rule("", "Prefix / a:80")),
			notes: []string{"timeouts.backendRequest 1h6s500ms bounds each request to a pod as a whole"},
			check: func(t *testing.T, res *Result) {
				if got := rules(route(res, "a")); !slices.Equal(got, []string{"PathPrefix / -> a:80 timeout:1h6s500ms"}) {
					t.Errorf("rules %q", got)
				}
			},
		},
		{
			name:  "a bad timeout",
			in:    ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/proxy-read-timeout: forever"}, rule("", "Prefix / a:80")),
			notes: []string{`not carried over: nginx.ingress.kubernetes.io/proxy-read-timeout on ns/a: "forever" is not a timeout`},
			check: func(t *testing.T, res *Result) {
				if route(res, "a").Spec.Rules[0].Timeouts != nil {
					t.Error("timeouts set")
				}
			},
		},
		{
			name: "CORS with ingress-nginx's defaults",
			in:   ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/enable-cors: true"}, rule("", "Prefix / a:80")),
			check: func(t *testing.T, res *Result) {
				f := route(res, "a").Spec.Rules[0].Filters
				if len(f) != 1 || f[0].CORS == nil {
					t.Fatalf("filters %s", mustJSON(f))
				}
				c := f[0].CORS
				if mustJSON(c.AllowOrigins) != `["*"]` || !*c.AllowCredentials || c.MaxAge != 1728000 || len(c.AllowMethods) != 6 || len(c.AllowHeaders) != 9 || c.ExposeHeaders != nil {
					t.Errorf("CORS %s", mustJSON(c))
				}
			},
		},
		{
			name: "CORS settings",
			in: ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/enable-cors: true", "nginx.ingress.kubernetes.io/cors-allow-origin: https://a.example.com,*",
				"nginx.ingress.kubernetes.io/cors-allow-headers: X-A, bad header", "nginx.ingress.kubernetes.io/cors-expose-headers: X-B",
				"nginx.ingress.kubernetes.io/cors-allow-credentials: false", "nginx.ingress.kubernetes.io/cors-allow-methods: get,*",
				"nginx.ingress.kubernetes.io/cors-max-age: 0"}, rule("", "Prefix / a:80")),
			notes: []string{
				`note: nginx.ingress.kubernetes.io/cors-allow-headers on ns/a: ["bad header"] are not header names: left out`,
				`not carried over: nginx.ingress.kubernetes.io/cors-max-age on ns/a: "0" is not a number of seconds (1 or more)`,
			},
			check: func(t *testing.T, res *Result) {
				c := route(res, "a").Spec.Rules[0].Filters[0].CORS
				want := `{"allowOrigins":["*"],"allowCredentials":false,"allowMethods":["*"],"allowHeaders":["X-A"],"exposeHeaders":["X-B"],"maxAge":1728000}`
				if mustJSON(c) != want {
					t.Errorf("CORS %s, want %s", mustJSON(c), want)
				}
			},
		},
		{
			name:  "CORS without enable-cors",
			in:    ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/enable-cors: false", "nginx.ingress.kubernetes.io/cors-allow-origin: *"}, rule("", "Prefix / a:80")),
			notes: []string{`not carried over: nginx.ingress.kubernetes.io/cors-allow-origin on ns/a: no effect without enable-cors: "true"`},
			check: func(t *testing.T, res *Result) {
				if f := route(res, "a").Spec.Rules[0].Filters; f != nil {
					t.Errorf("filters %s", mustJSON(f))
				}
			},
		},
		{
			name:  "CORS origins the Gateway API does not take",
			in:    ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/enable-cors: true", "nginx.ingress.kubernetes.io/cors-allow-origin: app://x"}, rule("", "Prefix / a:80")),
			notes: []string{`not carried over: nginx.ingress.kubernetes.io/cors-allow-origin on ns/a: "app://x" lists no origin the Gateway API takes`},
		},
		{
			name:  "HTTP/2 backends and their appProtocol",
			in:    service + ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/backend-protocol: grpc"}, rule("", "Prefix / named:grpc", "Prefix /b named:web", "Prefix /c named:8080")),
			notes: []string{"note: nginx.ingress.kubernetes.io/backend-protocol on ns/a: set appProtocol: kubernetes.io/h2c on port 8080 of Service ns/named"},
			check: func(t *testing.T, res *Result) {
				if n := len(res.Notes); n != 1 {
					t.Errorf("notes %q, want one for port 8080", noteLines(res))
				}
			},
		},
		{
			name: "backend protocols without an equivalent",
			in: ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/backend-protocol: HTTPS"}, rule("", "Prefix / a:443")) +
				ingress("ns", "b", []string{"nginx.ingress.kubernetes.io/backend-protocol: FCGI"}, rule("", "Prefix /b b:80")),
			notes: []string{
				"not carried over: nginx.ingress.kubernetes.io/backend-protocol on ns/a: TLS to the pods takes a BackendTLSPolicy",
				`not carried over: nginx.ingress.kubernetes.io/backend-protocol on ns/b: "FCGI" is not one of HTTP, HTTPS, GRPC, GRPCS, H2C`,
			},
		},
		{
			name: "annotations with no equivalent",
			in: ingress("ns", "a", []string{
				"nginx.ingress.kubernetes.io/proxy-body-size: 8m", "nginx.ingress.kubernetes.io/allowlist-source-range: 10.0.0.0/8",
				"nginx.ingress.kubernetes.io/affinity: cookie", "nginx.ingress.kubernetes.io/session-cookie-max-age: 60",
				"nginx.ingress.kubernetes.io/auth-url: http://auth", "svcnet.dev/enable-cors: true", "svcnet.dev/nonsense: 1",
				"kubernetes.io/ingress.class: nginx", "example.com/owner: team-a", "nginx.ingress.kubernetes.io/ssl-redirect: maybe",
			}, rule("", "Prefix / a:80")),
			o: Options{GatewayClass: "edge"},
			notes: []string{
				"not carried over: example.com/owner on ns/a: not an ingress-nginx or svcnet setting",
				"not carried over: kubernetes.io/ingress.class on ns/a: the Gateway's class is edge (--gateway-class)",
				"not carried over: nginx.ingress.kubernetes.io/auth-url on ns/a: svcnet ingress convert has no Gateway API equivalent for it",
				"not carried over: svcnet.dev/enable-cors on ns/a: not a setting of svcnet ingress",
				"not carried over: svcnet.dev/nonsense on ns/a: not a setting of svcnet ingress",
				`not carried over: nginx.ingress.kubernetes.io/ssl-redirect on ns/a: "maybe" is not true or false`,
				"not carried over: nginx.ingress.kubernetes.io/proxy-body-size on ns/a: the Gateway API has no request-body limit",
				"not carried over: nginx.ingress.kubernetes.io/allowlist-source-range on ns/a: the Gateway API has no client-address allow-list",
				"not carried over: nginx.ingress.kubernetes.io/affinity on ns/a: the Gateway API's sessionPersistence is experimental",
				"not carried over: nginx.ingress.kubernetes.io/session-cookie-max-age on ns/a: the Gateway API's sessionPersistence is experimental",
			},
		},
		{
			name: "both names of a setting",
			in: ingress("ns", "a", []string{"svcnet.dev/ssl-redirect: false", "nginx.ingress.kubernetes.io/ssl-redirect: true",
				"svcnet.dev/proxy-read-timeout: 5", "nginx.ingress.kubernetes.io/proxy-read-timeout: 5"}, tls("t", "h.example.com")+rule("h.example.com", "Prefix / a:80")),
			notes: []string{"not carried over: nginx.ingress.kubernetes.io/ssl-redirect on ns/a: svcnet.dev/ssl-redirect is set too and wins"},
			check: func(t *testing.T, res *Result) {
				if route(res, "a-ssl-redirect") != nil {
					t.Error("redirected")
				}
				if !slices.Contains(res.Carried[res.Ingresses[0]], "nginx.ingress.kubernetes.io/proxy-read-timeout") {
					t.Errorf("carried %q", res.Carried[res.Ingresses[0]])
				}
			},
		},
		{
			name: "a canary of another namespace",
			in: ingress("one", "main", nil, rule("h.example.com", "Prefix / main:80")) +
				ingress("two", "canary", []string{"nginx.ingress.kubernetes.io/canary: true", "nginx.ingress.kubernetes.io/canary-weight: 50"}, rule("h.example.com", "Prefix / next:80")),
			o: Options{GatewayNamespace: "one"},
			check: func(t *testing.T, res *Result) {
				b := route(res, "main").Spec.Rules[0].BackendRefs[1]
				if b.Namespace == nil || *b.Namespace != "two" || b.Name != "next" {
					t.Errorf("canary backendRef %s", mustJSON(b))
				}
				if len(res.ReferenceGrants) != 1 {
					t.Fatalf("grants %s", mustJSON(res.ReferenceGrants))
				}
				g := res.ReferenceGrants[0]
				if g.Namespace != "two" || g.Name != "httproutes-one" || g.Spec.From[0].Kind != "HTTPRoute" || g.Spec.From[0].Namespace != "one" ||
					g.Spec.To[0].Kind != "Service" || *g.Spec.To[0].Name != "next" {
					t.Errorf("grant %s", mustJSON(g))
				}
			},
		},
		{
			name: "both names of a setting, with one bad value",
			in: ingress("ns", "a", []string{"svcnet.dev/ssl-redirect: maybe", "nginx.ingress.kubernetes.io/ssl-redirect: maybe"},
				rule("", "Prefix / a:80")),
			notes: []string{
				`not carried over: svcnet.dev/ssl-redirect on ns/a: "maybe" is not true or false`,
				"not carried over: nginx.ingress.kubernetes.io/ssl-redirect on ns/a: svcnet.dev/ssl-redirect is set too and wins",
			},
		},
		{
			name: "a canary's other annotations",
			in: ingress("ns", "main", nil, rule("", "Prefix / main:80")) +
				ingress("ns", "c", []string{"nginx.ingress.kubernetes.io/canary: true", "nginx.ingress.kubernetes.io/canary-weight: 1",
					"nginx.ingress.kubernetes.io/proxy-read-timeout: 5"}, tls("c-tls", "c.example.com")+defaultBackend("c", 80)+rule("", "Prefix / c:80")),
			notes: []string{
				"not carried over: nginx.ingress.kubernetes.io/proxy-read-timeout on ns/c: ingress-nginx ignores it on a canary Ingress",
				"left out: ns/c: spec.tls of a canary Ingress is not used",
				"left out: ns/c: the defaultBackend of a canary Ingress is not carried over",
			},
		},
		{
			name:  "canary-* without canary",
			in:    ingress("ns", "a", []string{"nginx.ingress.kubernetes.io/canary: false", "nginx.ingress.kubernetes.io/canary-weight: 5"}, rule("", "Prefix / a:80")),
			notes: []string{`not carried over: nginx.ingress.kubernetes.io/canary-weight on ns/a: no effect without canary: "true"`},
		},
		{
			name: "Ingresses of several namespaces",
			in: ingress("one", "a", nil, tls("a-tls", "a.example.com")+rule("a.example.com", "Prefix / a:80")) +
				ingress("two", "b", nil, rule("b.example.com", "Prefix / b:80")),
			o: Options{GatewayNamespace: "gw"},
			check: func(t *testing.T, res *Result) {
				if got := parents(route(res, "a")); !slices.Equal(got, []string{"gw/https-a-example-com"}) {
					t.Errorf("parents %q", got)
				}
				ls := res.Gateway.Spec.Listeners
				if got := ls[0].AllowedRoutes.Namespaces.Selector.MatchExpressions[0].Values; !slices.Equal(got, []string{"one", "two"}) {
					t.Errorf("http listener's namespaces %q", got)
				}
				if got := ls[1].AllowedRoutes.Namespaces.Selector.MatchExpressions[0].Values; !slices.Equal(got, []string{"one"}) {
					t.Errorf("https listener's namespaces %q", got)
				}
				if len(res.ReferenceGrants) != 1 || res.ReferenceGrants[0].Namespace != "one" || *res.ReferenceGrants[0].Spec.To[0].Name != "a-tls" {
					t.Errorf("grants %s", mustJSON(res.ReferenceGrants))
				}
			},
		},
		{
			name: "Ingresses of several namespaces, no Gateway namespace",
			in:   ingress("one", "a", nil, rule("", "Prefix / a:80")) + ingress("two", "b", nil, rule("", "Prefix / b:80")),
			err:  "the Ingresses are in namespaces one, two: give the Gateway's with --gateway-namespace",
		},
		{
			name: "a bad Gateway name",
			in:   ingress("ns", "a", nil, rule("", "Prefix / a:80")),
			o:    Options{GatewayName: "Bad_Name"},
			err:  `--gateway-name "Bad_Name"`,
		},
		{
			name: "an Ingress twice",
			in: ingress("ns", "a", nil, rule("", "Prefix / a:80")) + ingress("ns", "b", nil, rule("", "Prefix /b b:80")) +
				strings.Replace(ingress("ns", "a", nil, rule("", "Prefix / a:80")), "  namespace: ns\n", "  namespace: ns\n  creationTimestamp: \"2026-01-01T00:00:00Z\"\n", 1),
			err: "the Ingress ns/a is given twice",
		},
		{
			name:  "hosts with different paths",
			in:    ingress("ns", "a", nil, rule("x.example.com", "Prefix / x:80")+rule("y.example.com", "Prefix / why:80")[len("  rules:\n"):]+rule("z.example.com", "Prefix / x:80")[len("  rules:\n"):]),
			notes: []string{"note: ns/a: its hosts have different paths, and an HTTPRoute's rules apply to all its hostnames: HTTPRoutes a, a-y.example.com"},
			check: func(t *testing.T, res *Result) {
				if h := route(res, "a").Spec.Hostnames; mustJSON(h) != `["x.example.com","z.example.com"]` {
					t.Errorf("hostnames %v", h)
				}
			},
		},
		{
			name:  "a wildcard host",
			in:    ingress("ns", "a", nil, rule("*.example.com", "Prefix / x:80")),
			notes: []string{"note: ns/a: host *.example.com: a Gateway API wildcard stands for one label or more (a.b.example.com too), an Ingress's for one"},
		},
		{
			name: "more hosts and rules than an HTTPRoute holds",
			in: func() string {
				spec := "  rules:\n"
				for h := range 20 {
					var paths []string
					for p := range 20 {
						svc := "even"
						if p%2 == 1 {
							svc = "odd"
						}
						paths = append(paths, fmt.Sprintf("Exact /p%d %s:80", p, svc))
					}
					spec += rule(fmt.Sprintf("h%d.example.com", h), paths...)[len("  rules:\n"):]
				}
				return ingress("ns", "a", nil, spec)
			}(),
			notes: []string{
				"20 rules are more than an HTTPRoute holds (16 rules, 128 matches): rules that do the same were merged",
				"split over HTTPRoutes a, a-2: an HTTPRoute holds 16 hostnames",
			},
			check: func(t *testing.T, res *Result) {
				if got := routeNames(res); !slices.Equal(got, []string{"ns/a", "ns/a-2"}) {
					t.Errorf("routes %q", got)
				}
				if got := rules(route(res, "a")); !slices.Equal(got, []string{"Exact /p0 -> even:80", "Exact /p1 -> odd:80"}) {
					t.Errorf("rules %q", got)
				}
				if n := len(route(res, "a").Spec.Hostnames); n != 16 {
					t.Errorf("%d hostnames", n)
				}
			},
		},
		{
			name: "more TLS hosts than a Gateway holds",
			in: func() string {
				var hosts []string
				for h := range 64 {
					hosts = append(hosts, fmt.Sprintf("h%d.example.com", h))
				}
				return ingress("ns", "a", nil, tls("t", hosts...)+rule("", "Prefix / a:80"))
			}(),
			err: "64 TLS hosts need 65 listeners, and a Gateway holds 64",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, out, err := convertYAML(t, tt.in, tt.o)
			if settled(t, err, tt.err) {
				return
			}
			validateStream(t, crds, out)
			lines := noteLines(res)
			i := 0
			for _, want := range tt.notes {
				j := slices.IndexFunc(lines[i:], func(l string) bool { return strings.Contains(l, want) })
				if j < 0 {
					t.Errorf("no note %q after note %d in:\n%s", want, i, strings.Join(lines, "\n"))
					continue
				}
				i += j + 1
			}
			if tt.notes == nil && tt.check == nil && len(lines) > 0 {
				t.Errorf("notes:\n%s", strings.Join(lines, "\n"))
			}
			if tt.check != nil {
				tt.check(t, res)
			}
		})
	}
}
