package route

import (
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// FuzzMatch builds a table from fuzzed rules and matches fuzzed requests:
// nothing panics, a cleaned path stays clean, and a route that matches
// is one the table holds, whose path really matches.
func FuzzMatch(f *testing.F) {
	f.Add("foo.com", "/a", "Prefix", "*.foo.com", "/a/b", "Exact", "x.foo.com:80", "/a/b/../b")
	f.Add("", "/", "ImplementationSpecific", "bar", "", "Prefix", "BAR.", "//")
	f.Add("a.b", "/%2f", "Exact", "*.b", "/.", "Weird", "[::1]:9", "/..")
	f.Fuzz(func(t *testing.T, h1, p1, t1, h2, p2, t2, reqHost, reqPath string) {
		in := ing("a", 0)
		for _, r := range [][3]string{{h1, p1, t1}, {h2, p2, t2}} {
			pt := networkingv1.PathType(r[2])
			in.Spec.Rules = append(in.Spec.Rules, networkingv1.IngressRule{Host: r[0],
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{Path: r[1], PathType: &pt, Backend: *backend("s:80")}}}}})
		}
		table, _ := Build([]*networkingv1.Ingress{in})
		p, ok := CleanPath(reqPath)
		if !ok {
			return
		}
		if again, _ := CleanPath(p); again != p {
			t.Fatalf("CleanPath(%q) = %q is not clean: %q", reqPath, p, again)
		}
		r := table.Match(reqHost, p)
		if r == nil {
			return
		}
		if !slices.Contains(table.Routes(), r) {
			t.Fatalf("matched a route the table does not list: %+v", r)
		}
		switch r.PathType {
		case networkingv1.PathTypeExact:
			if r.Path != p {
				t.Fatalf("exact %q matched %q", r.Path, p)
			}
		case networkingv1.PathTypePrefix:
			pre := strings.TrimSuffix(r.Path, "/")
			if q := strings.TrimSuffix(p, "/"); q != pre && !strings.HasPrefix(q, pre+"/") {
				t.Fatalf("prefix %q matched %q", r.Path, p)
			}
		}
	})
}
