package route

import (
	"fmt"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

func canaryIng(name string, age int, weight int, lines ...string) *networkingv1.Ingress {
	in := ing(name, age, lines...)
	in.Annotations = map[string]string{"nginx.ingress.kubernetes.io/canary": "true",
		"nginx.ingress.kubernetes.io/canary-weight": fmt.Sprint(weight)}
	return in
}

func TestCanary(t *testing.T) {
	table, problems := Build([]*networkingv1.Ingress{
		// The canary is older than its primary: it still attaches.
		canaryIng("canary", 0, 30, "foo.com /app Prefix app-v2:80", "foo.com /lonely Prefix x:80"),
		ing("main", 1, "foo.com /app Prefix app:80", "foo.com /other Prefix other:80"),
		canaryIng("late-canary", 2, 50, "foo.com /app Prefix app-v3:80"),
	})
	r := table.Match("foo.com", "/app/x")
	if r == nil || r.Ingress.Name != "main" || r.Canary == nil {
		t.Fatalf("route %+v", r)
	}
	c := r.Canary
	if b := table.Backends[c.Backend]; c.Ingress.Name != "canary" || b.Name != "app-v2" || c.Rule == nil || c.Rule.Weight != 30 || c.Path != "/app" {
		t.Errorf("canary %+v to %s, rule %+v", c, table.Backends[c.Backend], c.Rule)
	}
	if r := table.Match("foo.com", "/other"); r == nil || r.Canary != nil {
		t.Errorf("/other: %+v", r)
	}
	if r := table.Match("foo.com", "/lonely"); r != nil {
		t.Errorf("a canary path without a primary is served: %+v", r)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.Ingress.Name+" "+p.Reason+": "+p.Message)
	}
	want := []string{
		"canary CanaryNotServed: Prefix path /lonely of host foo.com: no other Ingress serves it",
		"late-canary RouteConflict: Prefix path /app of host foo.com already has the older canary default/canary",
	}
	if len(got) != len(want) {
		t.Fatalf("problems\n%s", strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %q, want %q", got[i], want[i])
		}
	}
}
