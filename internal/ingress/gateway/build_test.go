package gateway

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/svcnet/svcnet/internal/ingress/route"
)

var t0 = metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))

func ptr[T any](v T) *T { return &v }

func testClass() *gatewayv1.GatewayClass {
	return &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "svcnet"},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: ControllerName}}
}

func testGateway(ns, name string, age int, listeners ...gatewayv1.Listener) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Second))},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: "svcnet", Listeners: listeners},
	}
}

func httpListener(name string, port int32, host string) gatewayv1.Listener {
	l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: gatewayv1.PortNumber(port), Protocol: gatewayv1.HTTPProtocolType}
	if host != "" {
		l.Hostname = ptr(gatewayv1.Hostname(host))
	}
	return l
}

func testRoute(ns, name string, age int, parent string, hosts []string, rules ...gatewayv1.HTTPRouteRule) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 2, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Second))},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(parent)}}},
			Rules:           rules,
		},
	}
	for _, h := range hosts {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(h))
	}
	return r
}

func backend(ns, name string, port int32, weight int32) gatewayv1.HTTPBackendRef {
	br := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
		Name: gatewayv1.ObjectName(name), Port: ptr(gatewayv1.PortNumber(port))}, Weight: ptr(weight)}}
	if ns != "" {
		br.Namespace = ptr(gatewayv1.Namespace(ns))
	}
	return br
}

func pathRule(typ gatewayv1.PathMatchType, path string, backends ...gatewayv1.HTTPBackendRef) gatewayv1.HTTPRouteRule {
	return gatewayv1.HTTPRouteRule{
		Matches:     []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr(typ), Value: ptr(path)}}},
		BackendRefs: backends,
	}
}

// services are the backends that exist: web and api in default (port
// 80), db in other.
func services(ns, name string) *corev1.Service {
	ok := map[string]bool{"default/web": true, "default/api": true, "other/db": true, "default/grpc": true}
	if !ok[ns+"/"+name] {
		return nil
	}
	port := corev1.ServicePort{Port: 80}
	if name == "grpc" {
		port.AppProtocol = ptr("kubernetes.io/h2c")
	}
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{port}}}
}

func input(gws []*gatewayv1.Gateway, routes ...*gatewayv1.HTTPRoute) Input {
	in := Input{
		Controller: ControllerName,
		Classes:    []*gatewayv1.GatewayClass{testClass()},
		Gateways:   gws,
		HTTPRoutes: routes,
		Namespaces: map[string]labels.Set{"default": {}, "other": {"team": "b"}},
		Service:    services,
		Infra:      map[types.NamespacedName]Infra{},
		Now:        t0,
	}
	for i, g := range gws {
		ports := map[int32]int32{}
		for _, l := range g.Spec.Listeners {
			if _, ok := ports[int32(l.Port)]; !ok {
				ports[int32(l.Port)] = int32(FirstPort + 10*i + len(ports))
			}
		}
		in.Infra[types.NamespacedName{Namespace: g.Namespace, Name: g.Name}] = Infra{Ports: ports, Addresses: []string{"172.18.255.1"}}
	}
	return in
}

// served is what a request to the proxy port gets: the backend's
// "namespace/name:port", "answer N", "redirect", or "404".
func served(out Output, port int, host, path string, header map[string]string) string {
	r := out.ByPort[port]
	if r == nil {
		return "no router"
	}
	h := http.Header{}
	for k, v := range header {
		h.Set(k, v)
	}
	rt := r.Route(&route.Request{Host: host, Path: path, Method: "GET", Port: port, Header: h.Get})
	switch {
	case rt == nil:
		return "404"
	case rt.Answer != 0:
		return "answer " + http.StatusText(rt.Answer)
	case rt.HTTPRule != nil && rt.HTTPRule.Redirect != nil:
		return "redirect"
	}
	return out.Backends[rt.Backend].String()
}

func TestRouting(t *testing.T) {
	gw := testGateway("default", "gw", 0, httpListener("http", 80, ""))
	hdr := gatewayv1.HTTPRouteRule{
		Matches: []gatewayv1.HTTPRouteMatch{{
			Path:    &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchPathPrefix), Value: ptr("/")},
			Headers: []gatewayv1.HTTPHeaderMatch{{Name: "X-Version", Value: "2"}},
		}},
		BackendRefs: []gatewayv1.HTTPBackendRef{backend("", "api", 80, 1)},
	}
	routes := []*gatewayv1.HTTPRoute{
		testRoute("default", "a", 1, "gw", []string{"example.com"},
			pathRule(gatewayv1.PathMatchPathPrefix, "/", backend("", "web", 80, 1)),
			pathRule(gatewayv1.PathMatchExact, "/api", backend("", "api", 80, 1)),
			pathRule(gatewayv1.PathMatchPathPrefix, "/api/v1", backend("", "api", 80, 1)),
			hdr),
		testRoute("default", "wild", 2, "gw", []string{"*.example.com"},
			pathRule(gatewayv1.PathMatchPathPrefix, "/", backend("", "api", 80, 1))),
		testRoute("default", "broken", 3, "gw", []string{"broken.example.com"},
			pathRule(gatewayv1.PathMatchPathPrefix, "/", backend("", "missing", 80, 1))),
		testRoute("default", "regex", 4, "gw", []string{"re.example.com"},
			pathRule(gatewayv1.PathMatchRegularExpression, "/v[0-9]+/.*", backend("", "web", 80, 1))),
	}
	out := Build(input([]*gatewayv1.Gateway{gw}, routes...))
	port := FirstPort
	tests := []struct {
		host, path string
		header     map[string]string
		want       string
	}{
		{"example.com", "/", nil, "default/web:80"},
		{"EXAMPLE.com:80", "/index.html", nil, "default/web:80"},
		{"example.com", "/api", nil, "default/api:80"},
		{"example.com", "/api/", nil, "default/web:80"}, // Exact does not take a trailing slash
		{"example.com", "/api/v1/users", nil, "default/api:80"},
		{"example.com", "/api/v10", nil, "default/web:80"}, // a prefix matches whole elements
		{"example.com", "/x", map[string]string{"X-Version": "2"}, "default/api:80"},
		{"foo.example.com", "/", nil, "default/api:80"},
		{"a.b.example.com", "/", nil, "default/api:80"}, // a wildcard stands for one label or more
		{"example.org", "/", nil, "404"},
		{"broken.example.com", "/", nil, "answer Internal Server Error"},
		{"re.example.com", "/v2/x", nil, "default/web:80"},
		{"re.example.com", "/x/v2/x", nil, "default/api:80"}, // whole-path regex; falls to the wildcard
	}
	for _, tt := range tests {
		if got := served(out, port, tt.host, tt.path, tt.header); got != tt.want {
			t.Errorf("%s%s %v: got %s, want %s", tt.host, tt.path, tt.header, got, tt.want)
		}
	}
}

func TestListenerHostnames(t *testing.T) {
	gw := testGateway("default", "gw", 0,
		httpListener("foo", 80, "foo.example.com"),
		httpListener("wild", 80, "*.example.com"),
		httpListener("any", 80, ""))
	sec := func(r *gatewayv1.HTTPRoute, section string) *gatewayv1.HTTPRoute {
		r.Spec.ParentRefs[0].SectionName = ptr(gatewayv1.SectionName(section))
		return r
	}
	out := Build(input([]*gatewayv1.Gateway{gw},
		sec(testRoute("default", "foo", 1, "gw", nil, pathRule(gatewayv1.PathMatchPathPrefix, "/", backend("", "web", 80, 1))), "foo"),
		sec(testRoute("default", "wild", 2, "gw", nil, pathRule(gatewayv1.PathMatchPathPrefix, "/", backend("", "api", 80, 1))), "wild"),
		sec(testRoute("default", "bar-only", 3, "gw", []string{"bar.com"}, pathRule(gatewayv1.PathMatchPathPrefix, "/", backend("", "web", 80, 1))), "foo"),
	))
	// The three listeners share one proxy port (the first listener's).
	port := FirstPort
	for host, want := range map[string]string{
		"foo.example.com": "default/web:80",
		"bar.example.com": "default/api:80",
		"example.com":     "404", // the listener without a hostname has no route
	} {
		if got := served(out, port, host, "/", nil); got != want {
			t.Errorf("%s: got %s, want %s", host, got, want)
		}
	}
	st := routeStatus(t, out, "bar-only")
	if c := meta.FindStatusCondition(st.Parents[0].Conditions, "Accepted"); c == nil || c.Reason != string(gatewayv1.RouteReasonNoMatchingListenerHostname) {
		t.Errorf("bar-only's Accepted: %+v", c)
	}
	g := out.Gateways[0].Status
	for _, l := range g.Listeners {
		want := map[gatewayv1.SectionName]int32{"foo": 1, "wild": 1, "any": 0}[l.Name]
		if l.AttachedRoutes != want {
			t.Errorf("listener %s: %d attached routes, want %d", l.Name, l.AttachedRoutes, want)
		}
	}
}

func routeStatus(t *testing.T, out Output, name string) gatewayv1.HTTPRouteStatus {
	t.Helper()
	for _, r := range out.Routes {
		if r.Route.Name == name {
			return r.Status
		}
	}
	t.Fatalf("no status for route %s", name)
	return gatewayv1.HTTPRouteStatus{}
}

func TestRouteStatus(t *testing.T) {
	gw := testGateway("default", "gw", 0, httpListener("http", 80, ""))
	all := testGateway("default", "all", 1, httpListener("http", 80, ""))
	all.Spec.Listeners[0].AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr(gatewayv1.NamespacesFromAll)}}
	grant := &gatewayv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "g"},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "default"}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}}}}
	rule := func(b gatewayv1.HTTPBackendRef) gatewayv1.HTTPRouteRule {
		return pathRule(gatewayv1.PathMatchPathPrefix, "/", b)
	}
	fromOther := testRoute("other", "from-other", 1, "gw", nil, rule(backend("", "db", 80, 1)))
	fromOther.Spec.ParentRefs[0].Namespace = ptr(gatewayv1.Namespace("default"))
	fromOtherToAll := testRoute("other", "from-other-all", 1, "all", nil, rule(backend("", "db", 80, 1)))
	fromOtherToAll.Spec.ParentRefs[0].Namespace = ptr(gatewayv1.Namespace("default"))
	kind := backend("", "web", 80, 1)
	kind.Kind = ptr(gatewayv1.Kind("ConfigMap"))
	unsupported := testRoute("default", "extension", 1, "gw", nil, rule(backend("", "web", 80, 1)))
	unsupported.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterExtensionRef}}
	noSection := testRoute("default", "no-section", 1, "gw", nil, rule(backend("", "web", 80, 1)))
	noSection.Spec.ParentRefs[0].SectionName = ptr(gatewayv1.SectionName("https"))
	tests := []struct {
		route              *gatewayv1.HTTPRoute
		grants             []*gatewayv1.ReferenceGrant
		accepted, resolved string // reasons
	}{
		{route: testRoute("default", "ok", 1, "gw", nil, rule(backend("", "web", 80, 1))), accepted: "Accepted", resolved: "ResolvedRefs"},
		{route: testRoute("default", "missing", 1, "gw", nil, rule(backend("", "nope", 80, 1))), accepted: "Accepted", resolved: "BackendNotFound"},
		{route: testRoute("default", "bad-port", 1, "gw", nil, rule(backend("", "web", 81, 1))), accepted: "Accepted", resolved: "BackendNotFound"},
		{route: testRoute("default", "cross", 1, "gw", nil, rule(backend("other", "db", 80, 1))), accepted: "Accepted", resolved: "RefNotPermitted"},
		{route: testRoute("default", "cross-granted", 1, "gw", nil, rule(backend("other", "db", 80, 1))), grants: []*gatewayv1.ReferenceGrant{grant},
			accepted: "Accepted", resolved: "ResolvedRefs"},
		{route: testRoute("default", "kind", 1, "gw", nil, rule(kind)), accepted: "Accepted", resolved: "InvalidKind"},
		{route: fromOther, accepted: "NotAllowedByListeners", resolved: "ResolvedRefs"},
		{route: fromOtherToAll, accepted: "Accepted", resolved: "ResolvedRefs"},
		{route: unsupported, accepted: "UnsupportedValue", resolved: "ResolvedRefs"},
		{route: noSection, accepted: "NoMatchingParent", resolved: "ResolvedRefs"},
	}
	for _, tt := range tests {
		t.Run(tt.route.Name, func(t *testing.T) {
			in := input([]*gatewayv1.Gateway{gw, all}, tt.route)
			in.Grants = tt.grants
			out := Build(in)
			st := routeStatus(t, out, tt.route.Name)
			if len(st.Parents) != 1 {
				t.Fatalf("parents: %+v", st.Parents)
			}
			p := st.Parents[0]
			if p.ControllerName != ControllerName {
				t.Errorf("controllerName %s", p.ControllerName)
			}
			for typ, want := range map[string]string{"Accepted": tt.accepted, "ResolvedRefs": tt.resolved} {
				c := meta.FindStatusCondition(p.Conditions, typ)
				if c == nil || c.Reason != want || c.ObservedGeneration != 2 || (c.Status == metav1.ConditionTrue) != (want == typ) {
					t.Errorf("%s: got %+v, want reason %s", typ, c, want)
				}
			}
		})
	}
}

func TestGatewayStatus(t *testing.T) {
	ok := testGateway("default", "ok", 0, httpListener("http", 80, ""))
	conflict := testGateway("default", "conflict", 1, httpListener("a", 80, "x.com"), httpListener("b", 80, "x.com"), httpListener("c", 81, ""))
	udp := testGateway("default", "udp", 2, httpListener("http", 80, ""), gatewayv1.Listener{Name: "udp", Port: 53, Protocol: gatewayv1.UDPProtocolType})
	pending := testGateway("default", "pending", 3, httpListener("http", 80, ""))
	in := input([]*gatewayv1.Gateway{ok, conflict, udp, pending})
	in.Infra[types.NamespacedName{Namespace: "default", Name: "pending"}] = Infra{}
	other := testGateway("default", "other", 4, httpListener("http", 80, ""))
	other.Spec.GatewayClassName = "someone-elses"
	in.Gateways = append(in.Gateways, other)
	out := Build(in)
	if len(out.Gateways) != 4 {
		t.Fatalf("%d gateways served, want 4 (not another class's)", len(out.Gateways))
	}
	type want struct{ accepted, programmed string }
	wants := map[string]want{
		"ok":       {"Accepted", "Programmed"},
		"conflict": {"ListenersNotValid", "Programmed"},
		"udp":      {"ListenersNotValid", "Programmed"},
		"pending":  {"Accepted", "AddressNotAssigned"},
	}
	for _, g := range out.Gateways {
		w := wants[g.Gateway.Name]
		a := meta.FindStatusCondition(g.Status.Conditions, "Accepted")
		p := meta.FindStatusCondition(g.Status.Conditions, "Programmed")
		if a == nil || a.Reason != w.accepted || a.Status != metav1.ConditionTrue {
			t.Errorf("%s Accepted: %+v, want %s", g.Gateway.Name, a, w.accepted)
		}
		if p == nil || p.Reason != w.programmed {
			t.Errorf("%s Programmed: %+v, want %s", g.Gateway.Name, p, w.programmed)
		}
	}
	byName := map[string]GatewayResult{}
	for _, g := range out.Gateways {
		byName[g.Gateway.Name] = g
	}
	for _, l := range byName["conflict"].Status.Listeners {
		c := meta.FindStatusCondition(l.Conditions, "Conflicted")
		if wantConflict := l.Name != "c"; (c.Status == metav1.ConditionTrue) != wantConflict {
			t.Errorf("listener %s Conflicted: %+v", l.Name, c)
		}
	}
	if got := byName["conflict"].Ports; len(got) != 1 || got[0] != 81 {
		t.Errorf("conflict's ports %v, want [81]: conflicted listeners get none", got)
	}
	l := byName["udp"].Status.Listeners[1]
	if c := meta.FindStatusCondition(l.Conditions, "Accepted"); c.Reason != "UnsupportedProtocol" {
		t.Errorf("udp listener: %+v", c)
	}
}

func TestTransitionTimeKept(t *testing.T) {
	gw := testGateway("default", "gw", 0, httpListener("http", 80, ""))
	out := Build(input([]*gatewayv1.Gateway{gw}))
	gw.Status = out.Gateways[0].Status
	in := input([]*gatewayv1.Gateway{gw})
	in.Now = metav1.NewTime(t0.Add(time.Hour))
	again := Build(in)
	if c := meta.FindStatusCondition(again.Gateways[0].Status.Conditions, "Accepted"); !c.LastTransitionTime.Equal(&t0) {
		t.Errorf("transition time moved to %v", c.LastTransitionTime)
	}
}

func TestWeights(t *testing.T) {
	gw := testGateway("default", "gw", 0, httpListener("http", 80, ""))
	r := testRoute("default", "split", 1, "gw", nil,
		pathRule(gatewayv1.PathMatchPathPrefix, "/", backend("", "web", 80, 3), backend("", "api", 80, 1), backend("", "missing", 80, 0)))
	out := Build(input([]*gatewayv1.Gateway{gw}, r))
	counts := map[string]int{}
	for range 4000 {
		counts[served(out, FirstPort, "x", "/", nil)]++
	}
	if w := counts["default/web:80"]; w < 2700 || w > 3300 {
		t.Errorf("web got %d of 4000, want about 3000: %v", w, counts)
	}
	if len(counts) != 2 {
		t.Errorf("weight 0 got requests: %v", counts)
	}
}

func TestAssignPorts(t *testing.T) {
	a, b, c := types.NamespacedName{Name: "a"}, types.NamespacedName{Name: "b"}, types.NamespacedName{Name: "c"}
	have := map[types.NamespacedName]Infra{
		a: {Ports: map[int32]int32{80: 20001}},
		b: {Ports: map[int32]int32{80: 20001}}, // made at once with a's
		c: {Ports: map[int32]int32{80: 20000}},
	}
	got := AssignPorts([]Want{{a, []int32{80, 443}}, {b, []int32{80}}, {c, []int32{80}}}, have)
	want := map[types.NamespacedName]map[int32]int32{
		a: {80: 20001, 443: 20002},
		b: {80: 20003},
		c: {80: 20000},
	}
	for gw, ports := range want {
		for p, pp := range ports {
			if got[gw][p] != pp {
				t.Errorf("%s:%d got %d, want %d", gw.Name, p, got[gw][p], pp)
			}
		}
	}
}

func TestServiceName(t *testing.T) {
	long := types.NamespacedName{Namespace: "a-very-long-namespace-name-indeed", Name: "and-a-gateway-name-that-is-long-too"}
	for _, gw := range []types.NamespacedName{{Namespace: "default", Name: "gw"}, long} {
		if n := ServiceName(gw); len(n) > 63 {
			t.Errorf("%s: %q is %d long", gw, n, len(n))
		}
	}
	if ServiceName(long) == ServiceName(types.NamespacedName{Namespace: long.Namespace, Name: long.Name + "2"}) {
		t.Error("cut names collide")
	}
}

func httpsListener(name string, port int32, host string, ns, secret string, kind string) gatewayv1.Listener {
	l := httpListener(name, port, host)
	l.Protocol = gatewayv1.HTTPSProtocolType
	ref := gatewayv1.SecretObjectReference{Name: gatewayv1.ObjectName(secret)}
	if ns != "" {
		ref.Namespace = ptr(gatewayv1.Namespace(ns))
	}
	if kind != "" {
		ref.Kind = ptr(gatewayv1.Kind(kind))
	}
	l.TLS = &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{ref}}
	return l
}

func TestHTTPSListeners(t *testing.T) {
	certs := map[string]*tls.Certificate{"default/good": {}, "default/wild": {}, "other/shared": {}}
	gw := testGateway("default", "gw", 0,
		httpsListener("good", 443, "good.example", "", "good", ""),
		httpsListener("wild", 443, "*.example", "", "wild", ""),
		httpsListener("missing", 8443, "", "", "nothing", ""),
		httpsListener("kind", 8444, "", "", "good", "ConfigMap"),
		httpsListener("cross", 8445, "", "other", "shared", ""),
	)
	grant := &gatewayv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "g"},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: "default"}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Secret"}}}}
	toMissing := testRoute("default", "to-missing", 1, "gw", nil, pathRule(gatewayv1.PathMatchPathPrefix, "/", backend("", "web", 80, 1)))
	toMissing.Spec.ParentRefs[0].SectionName = ptr(gatewayv1.SectionName("missing"))
	for _, granted := range []bool{false, true} {
		in := input([]*gatewayv1.Gateway{gw}, toMissing)
		in.Certificate = func(ns, name string) (*tls.Certificate, error) {
			if c := certs[ns+"/"+name]; c != nil {
				return c, nil
			}
			return nil, errors.New("not found")
		}
		if granted {
			in.Grants = []*gatewayv1.ReferenceGrant{grant}
		}
		out := Build(in)
		want := map[gatewayv1.SectionName]string{"good": "ResolvedRefs", "wild": "ResolvedRefs", "missing": "InvalidCertificateRef",
			"kind": "InvalidCertificateRef", "cross": "RefNotPermitted"}
		if granted {
			want["cross"] = "ResolvedRefs"
		}
		for _, l := range out.Gateways[0].Status.Listeners {
			c := meta.FindStatusCondition(l.Conditions, "ResolvedRefs")
			p := meta.FindStatusCondition(l.Conditions, "Programmed")
			if c.Reason != want[l.Name] || (p.Status == metav1.ConditionTrue) != (want[l.Name] == "ResolvedRefs") {
				t.Errorf("granted %v, listener %s: ResolvedRefs %s, Programmed %s; want %s", granted, l.Name, c.Reason, p.Status, want[l.Name])
			}
			// A route attaches to a listener whose certificate is
			// unresolved, as the spec counts it.
			if l.Name == "missing" && l.AttachedRoutes != 1 {
				t.Errorf("listener missing: %d attached routes, want 1", l.AttachedRoutes)
			}
		}
		port := FirstPort // 443's
		got := out.TLS[port]
		if len(got) != 2 || got[0].Hostname != "good.example" || got[1].Hostname != "*.example" {
			t.Fatalf("port 443's certificates: %+v", got)
		}
		for name, want := range map[string]*tls.Certificate{"good.example": certs["default/good"], "a.b.example": certs["default/wild"], "": certs["default/wild"]} {
			if Pick(got, name) != want {
				t.Errorf("SNI %q: wrong certificate", name)
			}
		}
	}
}

func TestPrefixRewrite(t *testing.T) {
	gw := testGateway("default", "gw", 0, httpListener("http", 80, ""))
	rewrite := gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{
		Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr("/new")}}}
	rule := gatewayv1.HTTPRouteRule{
		Matches: []gatewayv1.HTTPRouteMatch{
			{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchPathPrefix), Value: ptr("/a")}},
			{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchPathPrefix), Value: ptr("/b/c/")}},
		},
		Filters:     []gatewayv1.HTTPRouteFilter{rewrite},
		BackendRefs: []gatewayv1.HTTPBackendRef{backend("", "web", 80, 1)},
	}
	exact := rule
	exact.Matches = []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchExact), Value: ptr("/a")}}}
	out := Build(input([]*gatewayv1.Gateway{gw},
		testRoute("default", "prefix", 1, "gw", []string{"p.example"}, rule),
		testRoute("default", "exact", 2, "gw", []string{"e.example"}, exact)))
	for path, want := range map[string]string{"/a/x": "/new/x", "/b/c/d": "/new/d", "/b/c": "/new"} {
		rt := out.ByPort[FirstPort].Route(&route.Request{Host: "p.example", Path: path, Method: "GET", Header: http.Header{}.Get})
		if rt == nil || rt.HTTPRule == nil || rt.HTTPRule.Rewrite == nil {
			t.Fatalf("%s: no rewrite: %+v", path, rt)
		}
		if got := rt.HTTPRule.Rewrite.Path.Apply(path); got != want {
			t.Errorf("%s rewritten to %s, want %s", path, got, want)
		}
	}
	st := routeStatus(t, out, "exact")
	if c := meta.FindStatusCondition(st.Parents[0].Conditions, "Accepted"); c.Reason != "UnsupportedValue" {
		t.Errorf("ReplacePrefixMatch on an Exact match: %+v", c)
	}
}

func TestBackendProtocol(t *testing.T) {
	gw := testGateway("default", "gw", 0, httpListener("http", 80, ""))
	out := Build(input([]*gatewayv1.Gateway{gw}, testRoute("default", "r", 1, "gw", nil,
		pathRule(gatewayv1.PathMatchPathPrefix, "/h2c", backend("", "grpc", 80, 1)),
		pathRule(gatewayv1.PathMatchPathPrefix, "/", backend("", "web", 80, 1)))))
	for path, want := range map[string]string{"/h2c": "H2C", "/": ""} {
		rt := out.ByPort[FirstPort].Route(&route.Request{Host: "x", Path: path, Method: "GET", Header: http.Header{}.Get})
		got := ""
		if rt.Config != nil {
			got = rt.Config.BackendProtocol
		}
		if got != want {
			t.Errorf("%s: backend protocol %q, want %q", path, got, want)
		}
	}
}

func TestTimeouts(t *testing.T) {
	gw := testGateway("default", "gw", 0, httpListener("http", 80, ""))
	rule := func(request, backendRequest string) gatewayv1.HTTPRouteRule {
		r := pathRule(gatewayv1.PathMatchPathPrefix, "/", backend("", "web", 80, 1))
		r.Timeouts = &gatewayv1.HTTPRouteTimeouts{}
		if request != "" {
			r.Timeouts.Request = ptr(gatewayv1.Duration(request))
		}
		if backendRequest != "" {
			r.Timeouts.BackendRequest = ptr(gatewayv1.Duration(backendRequest))
		}
		return r
	}
	tests := []struct {
		request, backend string
		want             time.Duration
	}{
		{"500ms", "", 500 * time.Millisecond},
		{"10s", "1s", time.Second},
		{"0s", "2s", 2 * time.Second},
		{"0s", "", 0},
	}
	for _, tt := range tests {
		out := Build(input([]*gatewayv1.Gateway{gw}, testRoute("default", "r", 1, "gw", nil, rule(tt.request, tt.backend))))
		rt := out.ByPort[FirstPort].Route(&route.Request{Host: "x", Path: "/", Method: "GET", Header: http.Header{}.Get})
		var got time.Duration
		if rt.HTTPRule != nil {
			got = rt.HTTPRule.Timeout
		}
		if got != tt.want {
			t.Errorf("request %q backendRequest %q: timeout %v, want %v", tt.request, tt.backend, got, tt.want)
		}
	}
}

func TestBackendFilters(t *testing.T) {
	gw := testGateway("default", "gw", 0, httpListener("http", 80, ""))
	setBackend := func(b gatewayv1.HTTPBackendRef, v string) gatewayv1.HTTPBackendRef {
		b.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "Backend", Value: v}}}}}
		return b
	}
	out := Build(input([]*gatewayv1.Gateway{gw}, testRoute("default", "r", 1, "gw", nil,
		pathRule(gatewayv1.PathMatchPathPrefix, "/", setBackend(backend("", "web", 80, 1), "web"), setBackend(backend("", "api", 80, 1), "api")))))
	seen := map[string]string{}
	for range 200 {
		rt := out.ByPort[FirstPort].Route(&route.Request{Host: "x", Path: "/", Method: "GET", Header: http.Header{}.Get})
		seen[out.Backends[rt.Backend].Name] = rt.HTTPRule.BackendRequestHeaders.Set[0].Value
	}
	if seen["web"] != "web" || seen["api"] != "api" {
		t.Errorf("each backend's own header: %v", seen)
	}
}

func TestMirrors(t *testing.T) {
	gw := testGateway("default", "gw", 0, httpListener("http", 80, ""))
	mirror := func(name string, percent *int32, fraction *gatewayv1.Fraction) gatewayv1.HTTPRouteFilter {
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestMirror, RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{
			BackendRef: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name), Port: ptr(gatewayv1.PortNumber(80))},
			Percent:    percent, Fraction: fraction}}
	}
	rule := pathRule(gatewayv1.PathMatchPathPrefix, "/", backend("", "web", 80, 1))
	rule.Filters = []gatewayv1.HTTPRouteFilter{
		mirror("api", nil, nil),
		mirror("api", ptr(int32(25)), nil),
		mirror("web", nil, &gatewayv1.Fraction{Numerator: 1, Denominator: ptr(int32(3))}),
		mirror("missing", nil, nil),
	}
	out := Build(input([]*gatewayv1.Gateway{gw}, testRoute("default", "r", 1, "gw", nil, rule)))
	rt := out.ByPort[FirstPort].Route(&route.Request{Host: "x", Path: "/", Method: "GET", Header: http.Header{}.Get})
	var got []string
	for _, m := range rt.HTTPRule.Mirrors {
		got = append(got, fmt.Sprintf("%s %.2f", out.Backends[m.Backend].Name, m.Fraction))
	}
	if want := []string{"api 1.00", "api 0.25", "web 0.33"}; !slices.Equal(got, want) {
		t.Errorf("mirrors %v, want %v", got, want)
	}
	st := routeStatus(t, out, "r")
	if c := meta.FindStatusCondition(st.Parents[0].Conditions, "ResolvedRefs"); c.Reason != "BackendNotFound" {
		t.Errorf("a mirror without its Service: %+v", c)
	}
}

func TestGRPCRoutes(t *testing.T) {
	gw := testGateway("default", "gw", 0, httpListener("http", 80, ""))
	method := func(typ gatewayv1.GRPCMethodMatchType, svc, m string) gatewayv1.GRPCRouteMatch {
		mm := &gatewayv1.GRPCMethodMatch{Type: ptr(typ)}
		if svc != "" {
			mm.Service = ptr(svc)
		}
		if m != "" {
			mm.Method = ptr(m)
		}
		return gatewayv1.GRPCRouteMatch{Method: mm}
	}
	rule := func(name string, ms ...gatewayv1.GRPCRouteMatch) gatewayv1.GRPCRouteRule {
		return gatewayv1.GRPCRouteRule{Matches: ms, BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: backend("", name, 80, 1).BackendRef}}}
	}
	gr := &gatewayv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "grpc", Generation: 3, CreationTimestamp: t0},
		Spec: gatewayv1.GRPCRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
			Hostnames:       []gatewayv1.Hostname{"grpc.example"},
			Rules: []gatewayv1.GRPCRouteRule{
				rule("web", method(gatewayv1.GRPCMethodMatchExact, "echo.Echo", "Echo")),
				rule("api", method(gatewayv1.GRPCMethodMatchExact, "echo.Echo", "")),
				rule("grpc", method(gatewayv1.GRPCMethodMatchRegularExpression, "", "Echo(Two|Three)")),
			},
		},
	}
	in := input([]*gatewayv1.Gateway{gw})
	in.GRPCRoutes = []*gatewayv1.GRPCRoute{gr}
	out := Build(in)
	for path, want := range map[string]string{
		"/echo.Echo/Echo":     "default/web:80",
		"/echo.Echo/EchoFour": "default/api:80",
		"/other.S/EchoTwo":    "default/grpc:80",
		"/other.S/Echo":       "404",
	} {
		rt := out.ByPort[FirstPort].Route(&route.Request{Host: "grpc.example", Path: path, Method: "POST", Header: http.Header{}.Get})
		got := "404"
		if rt != nil {
			got = out.Backends[rt.Backend].String()
			if rt.Config == nil || rt.Config.BackendProtocol != "H2C" {
				t.Errorf("%s: not HTTP/2 to the backend", path)
			}
		}
		if got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
	if len(out.GRPCRoutes) != 1 || len(out.Routes) != 0 {
		t.Fatalf("statuses: %d GRPCRoutes, %d HTTPRoutes", len(out.GRPCRoutes), len(out.Routes))
	}
	p := out.GRPCRoutes[0].Status.Parents[0]
	if c := meta.FindStatusCondition(p.Conditions, "Accepted"); c.Status != metav1.ConditionTrue || c.ObservedGeneration != 3 {
		t.Errorf("Accepted: %+v", c)
	}
	if n := out.Gateways[0].Status.Listeners[0].AttachedRoutes; n != 1 {
		t.Errorf("attachedRoutes %d, want 1", n)
	}
}

func TestTLSRoutes(t *testing.T) {
	term := httpsListener("term", 443, "secure.example", "", "good", "")
	term.Protocol = gatewayv1.TLSProtocolType
	term.TLS.Mode = ptr(gatewayv1.TLSModeTerminate)
	pass := gatewayv1.Listener{Name: "pass", Port: 443, Protocol: gatewayv1.TLSProtocolType, Hostname: ptr(gatewayv1.Hostname("*.example")),
		TLS: &gatewayv1.ListenerTLSConfig{Mode: ptr(gatewayv1.TLSModePassthrough)}}
	gw := testGateway("default", "gw", 0, term, pass)
	cert := &tls.Certificate{}
	tr := &gatewayv1.TLSRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tls", Generation: 1, CreationTimestamp: t0},
		Spec: gatewayv1.TLSRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
			Hostnames:       []gatewayv1.Hostname{"a.example", "secure.example"},
			Rules:           []gatewayv1.TLSRouteRule{{BackendRefs: []gatewayv1.BackendRef{backend("", "web", 80, 1).BackendRef}}},
		},
	}
	in := input([]*gatewayv1.Gateway{gw}, testRoute("default", "http-on-tls", 2, "gw", nil, pathRule(gatewayv1.PathMatchPathPrefix, "/", backend("", "web", 80, 1))))
	in.TLSRoutes = []*gatewayv1.TLSRoute{tr}
	in.Certificate = func(ns, name string) (*tls.Certificate, error) { return cert, nil }
	out := Build(in)
	ports := out.TLSPorts[FirstPort]
	if len(ports) != 2 || ports[0].Hostname != "secure.example" || ports[0].Cert != cert || ports[1].Cert != nil {
		t.Fatalf("stream port listeners: %+v", ports)
	}
	for sni, want := range map[string]string{"a.example": "default/web:80", "secure.example": "default/web:80", "b.example": "404"} {
		rt := out.ByPort[FirstPort].Route(&route.Request{Host: sni, Path: "/", Header: http.Header{}.Get})
		got := "404"
		if rt != nil {
			got = out.Backends[rt.Backend].String()
		}
		if got != want {
			t.Errorf("SNI %s: %s, want %s", sni, got, want)
		}
	}
	if c, ok := PickListener(ports, "secure.example"); !ok || c != cert {
		t.Error("secure.example is not terminated with its listener's certificate")
	}
	if c, ok := PickListener(ports, "x.y.example"); !ok || c != nil {
		t.Error("x.y.example is not passed through")
	}
	if _, ok := PickListener(ports, "other.org"); ok {
		t.Error("other.org has a listener")
	}
	if len(out.TLSRoutes) != 1 {
		t.Fatalf("%d TLSRoute statuses", len(out.TLSRoutes))
	}
	if c := meta.FindStatusCondition(out.TLSRoutes[0].Status.Parents[0].Conditions, "Accepted"); c.Status != metav1.ConditionTrue {
		t.Errorf("TLSRoute Accepted: %+v", c)
	}
	if c := meta.FindStatusCondition(routeStatus(t, out, "http-on-tls").Parents[0].Conditions, "Accepted"); c.Reason != "NotAllowedByListeners" {
		t.Errorf("an HTTPRoute on TLS listeners: %+v", c)
	}
}

func TestRequestedAddresses(t *testing.T) {
	ip := gatewayv1.IPAddressType
	host := gatewayv1.HostnameAddressType
	for _, tt := range []struct {
		addr gatewayv1.GatewaySpecAddress
		want string
	}{
		{gatewayv1.GatewaySpecAddress{Type: &ip}, "Accepted"},
		{gatewayv1.GatewaySpecAddress{}, "Accepted"},
		{gatewayv1.GatewaySpecAddress{Type: &ip, Value: "172.18.255.210"}, "UnsupportedAddress"},
		{gatewayv1.GatewaySpecAddress{Type: &host}, "UnsupportedAddress"},
	} {
		gw := testGateway("default", "gw", 0, httpListener("http", 8080, ""))
		gw.Spec.Addresses = []gatewayv1.GatewaySpecAddress{tt.addr}
		out := Build(input([]*gatewayv1.Gateway{gw}))
		if c := meta.FindStatusCondition(out.Gateways[0].Status.Conditions, "Accepted"); c.Reason != tt.want {
			t.Errorf("%+v: Accepted %s, want %s", tt.addr, c.Reason, tt.want)
		}
	}
}
