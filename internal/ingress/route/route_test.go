package route

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// ing builds an Ingress aged by age (0 oldest) from rules written as
// "host path type svc:port" lines; "default svc:port" sets the default
// backend.
func ing(name string, age int, lines ...string) *networkingv1.Ingress {
	ns, n, ok := strings.Cut(name, "/")
	if !ok {
		ns, n = "default", name
	}
	in := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n,
		CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))}}
	rules := map[string]*networkingv1.IngressRule{}
	var order []string
	for _, l := range lines {
		f := strings.Fields(l)
		if f[0] == "default" {
			in.Spec.DefaultBackend = backend(f[1])
			continue
		}
		host := f[0]
		if host == "-" {
			host = ""
		}
		r := rules[host]
		if r == nil {
			r = &networkingv1.IngressRule{Host: host}
			rules[host] = r
			order = append(order, host)
		}
		if len(f) == 1 {
			continue
		}
		if r.HTTP == nil {
			r.HTTP = &networkingv1.HTTPIngressRuleValue{}
		}
		var pt *networkingv1.PathType
		if f[2] != "-" {
			pt = ptr.To(networkingv1.PathType(f[2]))
		}
		r.HTTP.Paths = append(r.HTTP.Paths, networkingv1.HTTPIngressPath{Path: f[1], PathType: pt, Backend: *backend(f[3])})
	}
	for _, h := range order {
		in.Spec.Rules = append(in.Spec.Rules, *rules[h])
	}
	return in
}

func backend(ref string) *networkingv1.IngressBackend {
	svc, port, _ := strings.Cut(ref, ":")
	b := &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc}}
	var n int32
	if _, err := fmt.Sscan(port, &n); err == nil {
		b.Service.Port.Number = n
	} else {
		b.Service.Port.Name = port
	}
	return b
}

// served names the backend a request gets: "svc:port", or "404".
func served(t *Table, host, path string) string {
	p, ok := CleanPath(path)
	if !ok {
		return "400"
	}
	r := t.Match(host, p)
	if r == nil {
		return "404"
	}
	b := t.Backends[r.Backend]
	return strings.TrimPrefix(b.String(), b.Namespace+"/")
}

func TestMatch(t *testing.T) {
	type req struct{ host, path, want string }
	tests := []struct {
		name      string
		ingresses []*networkingv1.Ingress
		reqs      []req
	}{{
		name: "prefix matches element by element",
		ingresses: []*networkingv1.Ingress{ing("a", 0,
			"foo.com /foo Prefix foo:80",
			"foo.com /foo/bar/ Prefix bar:80")},
		reqs: []req{
			{"foo.com", "/foo", "foo:80"},
			{"foo.com", "/foo/", "foo:80"},
			{"foo.com", "/foo/baz", "foo:80"},
			{"foo.com", "/foobar", "404"},
			{"foo.com", "/foo/bar", "bar:80"},
			{"foo.com", "/foo/bar/", "bar:80"},
			{"foo.com", "/foo/bar/x/y", "bar:80"},
			{"foo.com", "/foo/barx", "foo:80"},
			{"foo.com", "/Foo", "404"}, // case-sensitive
			{"foo.com", "/", "404"},
		},
	}, {
		name: "exact matches exactly and beats an equal prefix",
		ingresses: []*networkingv1.Ingress{ing("a", 0,
			"foo.com /foo Exact exact:80",
			"foo.com /foo Prefix prefix:80",
			"foo.com /bar/ Exact slash:80")},
		reqs: []req{
			{"foo.com", "/foo", "exact:80"},
			{"foo.com", "/foo/", "prefix:80"},
			{"foo.com", "/foo/x", "prefix:80"},
			{"foo.com", "/bar/", "slash:80"},
			{"foo.com", "/bar", "404"},
		},
	}, {
		name: "longest path wins, whatever the order",
		ingresses: []*networkingv1.Ingress{ing("a", 0,
			"- / Prefix root:80",
			"- /a/b/c Prefix abc:80",
			"- /a Prefix a:80",
			"- /a/b Exact abexact:80")},
		reqs: []req{
			{"x", "/", "root:80"},
			{"x", "/zzz", "root:80"},
			{"x", "/a/b", "abexact:80"},
			{"x", "/a/b/", "a:80"},
			{"x", "/a/b/c/d", "abc:80"},
			{"x", "/a/bc", "a:80"},
		},
	}, {
		name: "implementation-specific is prefix; empty path is /",
		ingresses: []*networkingv1.Ingress{ing("a", 0,
			"foo.com /app ImplementationSpecific app:80",
			"bar.com /api - api:80")},
		reqs: []req{
			{"foo.com", "/app/x", "app:80"},
			{"foo.com", "/apps", "404"},
			{"bar.com", "/api/v1", "api:80"},
		},
	}, {
		name: "hosts: exact beats wildcard, wildcard is one label, port and case ignored",
		ingresses: []*networkingv1.Ingress{ing("a", 0,
			"*.foo.com / Prefix wild:80",
			"bar.foo.com / Prefix bar:80",
			"- / Prefix any:80")},
		reqs: []req{
			{"bar.foo.com", "/", "bar:80"},
			{"BAR.Foo.com:8080", "/x", "bar:80"},
			{"baz.foo.com", "/", "wild:80"},
			{"baz.foo.com.", "/", "wild:80"},
			{"foo.com", "/", "any:80"},
			{"a.baz.foo.com", "/", "any:80"},
			{"other", "/", "any:80"},
			{"[::1]:80", "/", "any:80"},
		},
	}, {
		name: "a chosen host does not fall through to less specific ones",
		ingresses: []*networkingv1.Ingress{ing("a", 0,
			"foo.com /only Prefix only:80",
			"- / Prefix any:80")},
		reqs: []req{
			{"foo.com", "/only", "only:80"},
			{"foo.com", "/else", "404"},
			{"bar.com", "/else", "any:80"},
		},
	}, {
		name: "ingresses merge per host; the oldest wins a conflict",
		ingresses: []*networkingv1.Ingress{
			ing("young", 5, "foo.com /a Prefix young-a:80", "foo.com /b Prefix young-b:80"),
			ing("old", 1, "foo.com /a Prefix old-a:80"),
			ing("exact", 9, "foo.com /a Exact exact-a:80"),
		},
		reqs: []req{
			{"foo.com", "/a/x", "old-a:80"},
			{"foo.com", "/a", "exact-a:80"},
			{"foo.com", "/b", "young-b:80"},
		},
	}, {
		name: "same age: namespace then name decide",
		ingresses: []*networkingv1.Ingress{
			ing("b/x", 0, "foo.com / Prefix bx:80"),
			ing("a/y", 0, "foo.com / Prefix ay:80"),
			ing("a/x", 0, "foo.com / Prefix ax:80"),
		},
		reqs: []req{{"foo.com", "/", "ax:80"}},
	}, {
		name: "default backends: an Ingress's own hosts, then the catch-all",
		ingresses: []*networkingv1.Ingress{
			ing("withrules", 2, "default own:80", "foo.com /app Prefix app:80", "*.bar.com /app Prefix wapp:80"),
			ing("catchall-young", 3, "default young:80"),
			ing("catchall", 1, "default catch:http"),
			ing("other", 0, "baz.com /app Prefix baz:80"),
		},
		reqs: []req{
			{"foo.com", "/app", "app:80"},
			{"foo.com", "/else", "own:80"},
			{"x.bar.com", "/else", "own:80"},
			{"baz.com", "/else", "catch:http"},
			{"nowhere.com", "/", "catch:http"},
		},
	}, {
		name:      "no catch-all: 404",
		ingresses: []*networkingv1.Ingress{ing("a", 0, "foo.com /app Prefix app:80")},
		reqs:      []req{{"bar.com", "/app", "404"}, {"foo.com", "/", "404"}},
	}, {
		name:      "dot segments and repeated slashes cannot escape a prefix",
		ingresses: []*networkingv1.Ingress{ing("a", 0, "- /public Prefix public:80", "- /admin Exact admin:80")},
		reqs: []req{
			{"x", "/public/../admin", "admin:80"},
			{"x", "/public/./x", "public:80"},
			{"x", "//public//x", "public:80"},
			{"x", "/public/..", "404"},
			{"x", "/../../public", "public:80"},
			{"x", "*", "400"},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table, _ := Build(tt.ingresses)
			for _, r := range tt.reqs {
				if got := served(table, r.host, r.path); got != r.want {
					t.Errorf("%s%s: got %s, want %s", r.host, r.path, got, r.want)
				}
			}
		})
	}
}

func TestProblems(t *testing.T) {
	resource := ing("resource", 0, "foo.com /x Prefix x:80")
	resource.Spec.Rules[0].HTTP.Paths[0].Backend = networkingv1.IngressBackend{
		Resource: &corev1TypedRef{Kind: "StorageBucket", Name: "static"}}
	tests := []struct {
		name      string
		ingresses []*networkingv1.Ingress
		want      []string // "ingress reason substring"
		routes    int
	}{
		{"conflict names the winner", []*networkingv1.Ingress{
			ing("young", 2, "foo.com /a Prefix y:80", "foo.com /b Prefix y:80"),
			ing("old", 1, "foo.com /a/ Prefix o:80"),
		}, []string{"default/young RouteConflict Prefix path /a of host foo.com is served by the older Ingress default/old"}, 2},
		{"a second catch-all loses", []*networkingv1.Ingress{
			ing("one", 1, "default a:80"), ing("two", 2, "default b:80"),
		}, []string{"default/two RouteConflict the catch-all default backend is served by the older Ingress default/one"}, 1},
		{"two defaults for one host", []*networkingv1.Ingress{
			ing("one", 1, "default a:80", "foo.com /a Prefix a:80"), ing("two", 2, "default b:80", "foo.com /b Prefix b:80"),
		}, []string{"default/two RouteConflict the default backend of host foo.com"}, 3},
		{"bad paths are left out", []*networkingv1.Ingress{ing("a", 0,
			"foo.com relative Prefix a:80", "foo.com /a//b Prefix a:80", "foo.com /a/.. Exact a:80",
			"foo.com /%2fetc Prefix a:80", "foo.com /x Weird a:80", "foo.com /ok Prefix a:80")},
			[]string{
				`default/a InvalidPath spec.rules[0].http.paths[0].path "relative" is not a valid Prefix path`,
				`default/a InvalidPath spec.rules[0].http.paths[1]`,
				`default/a InvalidPath spec.rules[0].http.paths[2]`,
				`default/a InvalidPath spec.rules[0].http.paths[3]`,
				`default/a InvalidPath spec.rules[0].http.paths[4].path "/x" is not a valid Weird path`,
			}, 1},
		{"bad hosts", []*networkingv1.Ingress{ing("a", 0, "foo..com / Prefix a:80", "*.*.com / Prefix a:80", "1.2.3.4:80 / Prefix a:80", "Good.COM / Prefix a:80")},
			[]string{"default/a InvalidHost spec.rules[0].host", "default/a InvalidHost spec.rules[1].host", "default/a InvalidHost spec.rules[2].host"}, 1},
		{"bad backends", []*networkingv1.Ingress{resource, ing("ports", 0, "bar.com /a Prefix Bad_Name:80", "bar.com /b Prefix ok:0")},
			[]string{
				`default/ports UnsupportedBackend spec.rules[0].http.paths[0].backend.service.name "Bad_Name"`,
				"default/ports UnsupportedBackend spec.rules[0].http.paths[1].backend.service.port needs exactly one",
				"default/resource UnsupportedBackend spec.rules[0].http.paths[0].backend: resource backends (StorageBucket static) are not supported",
			}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table, problems := Build(tt.ingresses)
			var got []string
			for _, p := range problems {
				got = append(got, p.Ingress.String()+" "+p.Reason+" "+p.Message)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("problems:\n%s\nwant %d", strings.Join(got, "\n"), len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("problem %d: %q, want it to start with %q", i, got[i], w)
				}
			}
			if table.Len() != tt.routes {
				t.Errorf("routes: %d, want %d (%v)", table.Len(), tt.routes, table.Routes())
			}
		})
	}
}

func TestBackendsAreShared(t *testing.T) {
	table, _ := Build([]*networkingv1.Ingress{
		ing("a", 0, "foo.com /a Prefix s:80", "foo.com /b Prefix s:80", "bar.com / Prefix t:http"),
		ing("other/a", 1, "baz.com / Prefix s:80"),
	})
	var got []string
	for _, b := range table.Backends {
		got = append(got, b.String())
	}
	want := []string{"default/s:80", "default/t:http", "other/s:80"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("backends %v, want %v", got, want)
	}
}

func TestCleanPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/", "/"}, {"/a/b", "/a/b"}, {"/a/b/", "/a/b/"}, {"//a", "/a"}, {"/a//b/", "/a/b/"},
		{"/a/./b", "/a/b"}, {"/a/../b", "/b"}, {"/..", "/"}, {"/a/..", "/"}, {"/a/b/..", "/a/"},
		{"/a/.", "/a/"}, {"/.well-known/x", "/.well-known/x"}, {"/a..b/c", "/a..b/c"}, {"/...", "/..."},
	}
	for _, tt := range tests {
		if got, ok := CleanPath(tt.in); !ok || got != tt.want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
		}
	}
	if _, ok := CleanPath("a"); ok {
		t.Error("a relative path is accepted")
	}
}

type corev1TypedRef = corev1.TypedLocalObjectReference

func TestPathModifier(t *testing.T) {
	tests := []struct {
		m          PathModifier
		path, want string
	}{
		{PathModifier{Prefix: "/prefix/one", Replace: "/one"}, "/prefix/one/two", "/one/two"},
		{PathModifier{Prefix: "/strip-prefix", Replace: "/"}, "/strip-prefix/three", "/three"},
		{PathModifier{Prefix: "/strip-prefix", Replace: "/"}, "/strip-prefix", "/"},
		{PathModifier{Prefix: "/strip-prefix", Replace: "/"}, "/strip-prefix/", "/"},
		{PathModifier{Prefix: "/a", Replace: "/b/"}, "/a/c", "/b/c"},
		{PathModifier{Prefix: "", Replace: "/x"}, "/y", "/x/y"},
		{PathModifier{Full: "/one", IsFull: true}, "/full/one/two", "/one"},
	}
	for _, tt := range tests {
		if got := tt.m.Apply(tt.path); got != tt.want {
			t.Errorf("%+v on %s: %s, want %s", tt.m, tt.path, got, tt.want)
		}
	}
}
