package route

import (
	"fmt"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

func withTLS(in *networkingv1.Ingress, secret string, hosts ...string) *networkingv1.Ingress {
	in.Spec.TLS = append(in.Spec.TLS, networkingv1.IngressTLS{SecretName: secret, Hosts: hosts})
	return in
}

func TestTLS(t *testing.T) {
	optOut := ing("optout", 3, "plain.com / Prefix p:80")
	optOut.Annotations = map[string]string{"nginx.ingress.kubernetes.io/ssl-redirect": "false"}
	badValue := ing("badvalue", 4, "bad.com / Prefix b:80")
	badValue.Annotations = map[string]string{"svcnet.dev/ssl-redirect": "nope"}
	table, problems := Build([]*networkingv1.Ingress{
		withTLS(ing("old", 0, "secure.com / Prefix s:80", "x.wild.com / Prefix w:80", "default d:80", "open.com / Prefix o:80"),
			"old-cert", "secure.com", "*.wild.com"),
		withTLS(ing("young", 1, "secure.com /young Prefix y:80"), "young-cert", "secure.com", "Other.com"),
		withTLS(ing("nohosts", 2, "implicit.com / Prefix i:80"), "implicit-cert"),
		withTLS(optOut, "plain-cert", "plain.com"),
		withTLS(badValue, "", "bad.com"),
	})
	var tls []string
	for _, h := range table.TLS {
		tls = append(tls, fmt.Sprintf("%s=%s(%s)", h.Host, h.Secret, h.Ingress.Name))
	}
	want := []string{"secure.com=default/old-cert(old)", "*.wild.com=default/old-cert(old)",
		"other.com=default/young-cert(young)", "implicit.com=default/implicit-cert(nohosts)", "plain.com=default/plain-cert(optout)"}
	if fmt.Sprint(tls) != fmt.Sprint(want) {
		t.Errorf("TLS hosts\n%v, want\n%v", tls, want)
	}
	redirects := []struct {
		host, path string
		want       bool
	}{
		{"secure.com", "/", true}, {"secure.com", "/young", true}, {"x.wild.com", "/", true},
		{"secure.com", "/", true}, {"open.com", "/", false}, {"implicit.com", "/", true},
		{"plain.com", "/", false},
	}
	for _, r := range redirects {
		if got := table.Match(r.host, r.path); got == nil || got.RedirectHTTPS != r.want {
			t.Errorf("%s%s: route %+v, want redirect %v", r.host, r.path, got, r.want)
		}
	}
	// A bad value leaves the whole Ingress out.
	if got := table.Match("bad.com", "/"); got != nil {
		t.Errorf("bad.com: served by %+v despite a bad annotation", got)
	}
	wantProblems := map[string]bool{
		"young RouteConflict":        true,
		"badvalue InvalidAnnotation": true,
	}
	seen := map[string]bool{}
	for _, p := range problems {
		k := p.Ingress.Name + " " + p.Reason
		if !wantProblems[k] {
			t.Errorf("unexpected problem %s: %s", k, p.Message)
		}
		seen[k] = true
	}
	for k := range wantProblems {
		if !seen[k] {
			t.Errorf("missing problem %s", k)
		}
	}
}

func TestUnsupportedAnnotations(t *testing.T) {
	in := ing("a", 0, "foo.com / Prefix s:80")
	in.Annotations = map[string]string{
		"nginx.ingress.kubernetes.io/limit-rps": "5",
		"svcnet.dev/server-snippet":             "x",
		"svcnet.dev/ssl-redirect":               "false",
		"example.com/unrelated":                 "x",
	}
	table, problems := Build([]*networkingv1.Ingress{in})
	var got []string
	for _, p := range problems {
		got = append(got, p.Reason+": "+p.Message)
	}
	want := []string{
		"UnsupportedAnnotation: annotation nginx.ingress.kubernetes.io/limit-rps: not supported by svcnet ingress; it has no effect",
		"UnsupportedAnnotation: annotation svcnet.dev/server-snippet: not supported by svcnet ingress; it has no effect",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("problems\n%v\nwant\n%v", got, want)
	}
	if table.Match("foo.com", "/") == nil {
		t.Error("the Ingress is not served")
	}
}
