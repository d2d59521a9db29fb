package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/svcnet/svcnet/internal/ingress/annotations"
	"github.com/svcnet/svcnet/internal/ingress/route"
)

// rule is an HTTPRoute rule compiled once for all its parents.
type rule struct {
	matches []match // without host and order
}

// attachRoute attaches a route to the listeners of its parents that are
// served here and records its status; age is its place among routes,
// oldest first.
func (b *builder) attachRoute(r *routeIn, age int) {
	nn := types.NamespacedName{Namespace: r.meta.Namespace, Name: r.meta.Name}
	gen := r.meta.Generation
	var ours []parent
	for i := range r.spec.ParentRefs {
		if p, ok := b.parentOf(r, &r.spec.ParentRefs[i]); ok {
			ours = append(ours, p)
		}
	}
	if len(ours) == 0 {
		return
	}
	rules, unsupported, resolved := b.compileRules(r, nn)
	var parents []gatewayv1.RouteParentStatus
	attachedTo := map[*listener]bool{}
	for _, p := range ours {
		accepted := cond(string(gatewayv1.RouteConditionAccepted), true, string(gatewayv1.RouteReasonAccepted), "", gen)
		if unsupported != "" {
			accepted = cond(string(gatewayv1.RouteConditionAccepted), false, string(gatewayv1.RouteReasonUnsupportedValue), unsupported, gen)
		} else if reason, msg := b.attach(r, p, rules, age, attachedTo); reason != "" {
			accepted = cond(string(gatewayv1.RouteConditionAccepted), false, reason, msg, gen)
		}
		old := oldParentConditions(r, p.ref)
		parents = append(parents, gatewayv1.RouteParentStatus{
			ParentRef:      *p.ref,
			ControllerName: b.in.Controller,
			Conditions:     merge(old, b.in.Now, accepted, resolved),
		})
	}
	// Other controllers' parents stay as they are.
	for _, ps := range r.parents {
		if ps.ControllerName != b.in.Controller {
			parents = append(parents, ps)
		}
	}
	r.done(gatewayv1.RouteStatus{Parents: parents})
}

// routeIn is a route of either kind as the builder attaches it: a
// GRPCRoute comes as the HTTPRoute it stands for (grpc.go).
type routeIn struct {
	kind    string
	meta    *metav1.ObjectMeta
	spec    *gatewayv1.HTTPRouteSpec
	parents []gatewayv1.RouteParentStatus
	// grpc: the backends are spoken to in HTTP/2 without TLS.
	grpc bool
	// done takes the route's status.
	done func(gatewayv1.RouteStatus)
}

// parent is a parentRef to a Gateway served here.
type parent struct {
	ref *gatewayv1.ParentReference
	gw  *gw
}

func (b *builder) parentOf(r *routeIn, ref *gatewayv1.ParentReference) (parent, bool) {
	if ref.Group != nil && *ref.Group != gatewayv1.GroupName {
		return parent{}, false
	}
	if ref.Kind != nil && *ref.Kind != kindGateway {
		return parent{}, false
	}
	ns := r.meta.Namespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	for _, g := range b.gateways {
		if g.nn.Namespace == ns && g.nn.Name == string(ref.Name) {
			return parent{ref: ref, gw: g}, true
		}
	}
	return parent{}, false
}

func oldParentConditions(r *routeIn, ref *gatewayv1.ParentReference) []metav1.Condition {
	for _, ps := range r.parents {
		if equalParentRef(&ps.ParentRef, ref, r.meta.Namespace) {
			return ps.Conditions
		}
	}
	return nil
}

func equalParentRef(a, b *gatewayv1.ParentReference, ns string) bool {
	str := func(p *gatewayv1.ParentReference) string {
		g, k, n, s, port := gatewayv1.GroupName, kindGateway, ns, "", ""
		if p.Group != nil {
			g = string(*p.Group)
		}
		if p.Kind != nil {
			k = string(*p.Kind)
		}
		if p.Namespace != nil {
			n = string(*p.Namespace)
		}
		if p.SectionName != nil {
			s = string(*p.SectionName)
		}
		if p.Port != nil {
			port = fmt.Sprint(*p.Port)
		}
		return strings.Join([]string{g, k, n, string(p.Name), s, port}, "/")
	}
	return str(a) == str(b)
}

// attach adds the route's matches to the listeners of one parent that
// take it; it returns the reason it is not accepted by any.
func (b *builder) attach(r *routeIn, p parent, rules []rule, age int, attachedTo map[*listener]bool) (reason, msg string) {
	var named []*listener
	for _, l := range p.gw.listeners {
		if p.ref.SectionName != nil && *p.ref.SectionName != l.spec.Name {
			continue
		}
		if p.ref.Port != nil && *p.ref.Port != l.spec.Port {
			continue
		}
		named = append(named, l)
	}
	if len(named) == 0 {
		return string(gatewayv1.RouteReasonNoMatchingParent), "no listener of the Gateway has the sectionName and port of the parentRef"
	}
	var allowed []*listener
	for _, l := range named {
		if l.attachable && b.allows(p.gw, l, r.meta.Namespace) && slices.ContainsFunc(l.kinds, func(k gatewayv1.RouteGroupKind) bool { return string(k.Kind) == r.kind }) {
			allowed = append(allowed, l)
		}
	}
	if len(allowed) == 0 {
		return string(gatewayv1.RouteReasonNotAllowedByListeners), "no listener of the parentRef takes " + r.kind + "s from namespace " + r.meta.Namespace
	}
	attached := false
	for _, l := range allowed {
		hosts := effectiveHosts(l.hostname, r.spec.Hostnames)
		if hosts == nil {
			continue
		}
		attached = true
		if attachedTo[l] {
			continue
		}
		attachedTo[l] = true
		l.attached++
		for ri, ru := range rules {
			for mi := range ru.matches {
				for _, h := range hosts {
					m := ru.matches[mi]
					m.host = h
					m.order = sortKey{route: age, rule: ri, match: mi}
					l.routes.matches = append(l.routes.matches, &m)
				}
			}
		}
	}
	if !attached {
		return string(gatewayv1.RouteReasonNoMatchingListenerHostname), "no hostname of the route matches a listener's hostname"
	}
	return "", ""
}

// effectiveHosts are the hostnames a route serves on a listener; nil
// when they share none, [""] for every host.
func effectiveHosts(listenerHost string, routeHosts []gatewayv1.Hostname) []string {
	if len(routeHosts) == 0 {
		return []string{listenerHost}
	}
	var out []string
	for _, h := range routeHosts {
		if i, ok := intersect(listenerHost, strings.ToLower(string(h))); ok && !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	return out
}

// compileRules compiles a route's rules. unsupported tells why the route
// cannot be served as it asks; resolved is its ResolvedRefs condition.
func (b *builder) compileRules(r *routeIn, nn types.NamespacedName) (rules []rule, unsupported string, resolved metav1.Condition) {
	gen := r.meta.Generation
	resolved = cond(string(gatewayv1.RouteConditionResolvedRefs), true, string(gatewayv1.RouteReasonResolvedRefs), "", gen)
	for i := range r.spec.Rules {
		ru := &r.spec.Rules[i]
		httpRule, why := compileFilters(ru.Filters)
		if why == "" {
			why = unsupportedRule(ru)
		}
		if why == "" {
			httpRule, why = withTimeouts(httpRule, ru.Timeouts)
		}
		if why == "" {
			var reason, msg string
			httpRule, reason, msg = b.withMirrors(r, httpRule, ru.Filters)
			if reason != "" && resolved.Status == metav1.ConditionTrue {
				resolved = cond(string(gatewayv1.RouteConditionResolvedRefs), false, reason, msg, gen)
			}
		}
		if why != "" {
			return nil, fmt.Sprintf("rule %d: %s", i, why), resolved
		}
		routes, weights, total, reason, msg := b.ruleBackends(r, nn, ru, httpRule)
		if reason != "" && resolved.Status == metav1.ConditionTrue {
			resolved = cond(string(gatewayv1.RouteConditionResolvedRefs), false, reason, msg, gen)
		}
		matches := ru.Matches
		if len(matches) == 0 {
			matches = []gatewayv1.HTTPRouteMatch{{}}
		}
		var compiled rule
		for j := range matches {
			m, err := compileMatch(&matches[j])
			if err != nil {
				return nil, fmt.Sprintf("rule %d match %d: %v", i, j, err), resolved
			}
			m.routes, m.weights, m.total = routes, weights, total
			if prefixed := withPrefix(httpRule, m.path); prefixed != httpRule {
				// A prefix replacement is the match's: the routes
				// of this match carry their own rule.
				if prefixed == nil {
					return nil, fmt.Sprintf("rule %d match %d: ReplacePrefixMatch needs a PathPrefix match", i, j), resolved
				}
				m.routes, m.weights, m.total, _, _ = b.ruleBackends(r, nn, ru, prefixed)
			}
			compiled.matches = append(compiled.matches, m)
		}
		rules = append(rules, compiled)
	}
	return rules, "", resolved
}

// withPrefix is hr with the prefix of a PathPrefix match filled into its
// prefix replacements; hr itself when it has none, nil when the match is
// not a PathPrefix.
func withPrefix(hr *route.HTTPRule, p pathMatch) *route.HTTPRule {
	needs := func(m *route.PathModifier) bool { return m != nil && !m.IsFull }
	if hr == nil || !(hr.Redirect != nil && needs(hr.Redirect.Path)) && !(hr.Rewrite != nil && needs(hr.Rewrite.Path)) {
		return hr
	}
	if p.kind != pathPrefix {
		return nil
	}
	out := *hr
	if hr.Redirect != nil && needs(hr.Redirect.Path) {
		red, m := *hr.Redirect, *hr.Redirect.Path
		m.Prefix = p.value
		red.Path, out.Redirect = &m, &red
	}
	if hr.Rewrite != nil && needs(hr.Rewrite.Path) {
		rw, m := *hr.Rewrite, *hr.Rewrite.Path
		m.Prefix = p.value
		rw.Path, out.Rewrite = &m, &rw
	}
	return &out
}

// withMirrors adds a rule's RequestMirror filters: each mirror's backend
// is checked as a backendRef is; one that cannot be used mirrors nothing
// and is told in reason and msg (for ResolvedRefs).
func (b *builder) withMirrors(r *routeIn, hr *route.HTTPRule, fs []gatewayv1.HTTPRouteFilter) (out *route.HTTPRule, reason, msg string) {
	out = hr
	for _, f := range fs {
		m := f.RequestMirror
		if f.Type != gatewayv1.HTTPRouteFilterRequestMirror || m == nil {
			continue
		}
		ref, _, why, problem := b.backendRef(r, &gatewayv1.BackendRef{BackendObjectReference: m.BackendRef})
		if why != "" {
			if reason == "" {
				reason, msg = why, "requestMirror: "+problem
			}
			continue
		}
		frac := 1.0
		switch {
		case m.Percent != nil:
			frac = float64(*m.Percent) / 100
		case m.Fraction != nil:
			den := int32(100)
			if m.Fraction.Denominator != nil {
				den = *m.Fraction.Denominator
			}
			if den > 0 {
				frac = float64(m.Fraction.Numerator) / float64(den)
			}
		}
		if frac <= 0 {
			continue
		}
		if out == hr {
			cp := route.HTTPRule{}
			if hr != nil {
				cp = *hr
			}
			cp.Mirrors = slices.Clone(cp.Mirrors)
			out = &cp
		}
		out.Mirrors = append(out.Mirrors, route.Mirror{Backend: b.ref(ref), Fraction: min(frac, 1)})
	}
	return out, reason, msg
}

// withTimeouts adds a rule's timeouts to what it does. svcnet bounds the
// whole request with the smaller of request and backendRequest: it does
// not retry a request that reached a backend, so a request's one
// backend request is the request.
func withTimeouts(hr *route.HTTPRule, t *gatewayv1.HTTPRouteTimeouts) (*route.HTTPRule, string) {
	if t == nil {
		return hr, ""
	}
	var d time.Duration
	for _, v := range []*gatewayv1.Duration{t.Request, t.BackendRequest} {
		if v == nil {
			continue
		}
		x, err := time.ParseDuration(string(*v))
		if err != nil || x < 0 {
			return nil, fmt.Sprintf("timeout %q is not a duration", *v)
		}
		if x > 0 && (d == 0 || x < d) {
			d = x
		}
	}
	if d == 0 {
		return hr, ""
	}
	out := route.HTTPRule{}
	if hr != nil {
		out = *hr
	}
	out.Timeout = d
	return &out, ""
}

// unsupportedRule tells what of a rule svcnet does not implement yet.
func unsupportedRule(ru *gatewayv1.HTTPRouteRule) string {
	switch {
	case ru.Retry != nil:
		return "retry is not supported yet"
	case ru.SessionPersistence != nil:
		return "sessionPersistence is not supported yet"
	}
	for _, br := range ru.BackendRefs {
		for _, f := range br.Filters {
			if f.Type != gatewayv1.HTTPRouteFilterRequestHeaderModifier && f.Type != gatewayv1.HTTPRouteFilterResponseHeaderModifier {
				return fmt.Sprintf("filter %s of a backendRef is not supported yet (header modifiers are)", f.Type)
			}
		}
	}
	return ""
}

func compileMatch(m *gatewayv1.HTTPRouteMatch) (match, error) {
	out := match{path: pathMatch{kind: pathPrefix}}
	if p := m.Path; p != nil {
		v := "/"
		if p.Value != nil {
			v = *p.Value
		}
		t := gatewayv1.PathMatchPathPrefix
		if p.Type != nil {
			t = *p.Type
		}
		switch t {
		case gatewayv1.PathMatchExact:
			out.path = pathMatch{kind: pathExact, value: v}
		case gatewayv1.PathMatchPathPrefix:
			out.path = pathMatch{kind: pathPrefix, value: strings.TrimSuffix(v, "/")}
		case gatewayv1.PathMatchRegularExpression:
			re, err := compileRegexp(v)
			if err != nil {
				return out, fmt.Errorf("path: %w", err)
			}
			out.path = pathMatch{kind: pathRegex, value: v, re: re}
		default:
			return out, fmt.Errorf("path match type %s is not supported", t)
		}
	}
	if m.Method != nil {
		out.method = string(*m.Method)
	}
	for _, h := range m.Headers {
		hm := headerMatch{name: http.CanonicalHeaderKey(string(h.Name)), value: h.Value}
		if h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression {
			re, err := compileRegexp(h.Value)
			if err != nil {
				return out, fmt.Errorf("header %s: %w", h.Name, err)
			}
			hm.re = re
		}
		out.header = append(out.header, hm)
	}
	for _, q := range m.QueryParams {
		qm := queryMatch{name: string(q.Name), value: q.Value}
		if q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression {
			re, err := compileRegexp(q.Value)
			if err != nil {
				return out, fmt.Errorf("query parameter %s: %w", q.Name, err)
			}
			qm.re = re
		}
		out.query = append(out.query, qm)
	}
	return out, nil
}

// compileFilters turns a rule's filters into what the proxy does; why
// names the first it cannot do.
func compileFilters(fs []gatewayv1.HTTPRouteFilter) (*route.HTTPRule, string) {
	var r route.HTTPRule
	for _, f := range fs {
		switch f.Type {
		case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
			if f.RequestHeaderModifier != nil {
				r.RequestHeaders = headerEdit(f.RequestHeaderModifier)
			}
		case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
			if f.ResponseHeaderModifier != nil {
				r.ResponseHeaders = headerEdit(f.ResponseHeaderModifier)
			}
		case gatewayv1.HTTPRouteFilterRequestRedirect:
			rr := f.RequestRedirect
			if rr == nil {
				continue
			}
			red := &route.Redirect{Status: http.StatusFound}
			if rr.Path != nil {
				m, why := pathModifier(rr.Path)
				if why != "" {
					return nil, "requestRedirect: " + why
				}
				red.Path = m
			}
			if rr.Scheme != nil {
				red.Scheme = *rr.Scheme
			}
			if rr.Hostname != nil {
				red.Hostname = string(*rr.Hostname)
			}
			if rr.Port != nil {
				red.Port = int(*rr.Port)
			}
			if rr.StatusCode != nil {
				red.Status = *rr.StatusCode
			}
			r.Redirect = red
		case gatewayv1.HTTPRouteFilterRequestMirror:
			// Resolved with the backends (withMirrors).
		case gatewayv1.HTTPRouteFilterCORS:
			if f.CORS != nil {
				r.CORS = cors(f.CORS)
			}
		case gatewayv1.HTTPRouteFilterURLRewrite:
			u := f.URLRewrite
			if u == nil {
				continue
			}
			rw := &route.Rewrite{}
			if u.Hostname != nil {
				rw.Hostname = string(*u.Hostname)
			}
			if u.Path != nil {
				m, why := pathModifier(u.Path)
				if why != "" {
					return nil, "urlRewrite: " + why
				}
				rw.Path = m
			}
			r.Rewrite = rw
		default:
			return nil, fmt.Sprintf("filter %s is not supported yet", f.Type)
		}
	}
	if r.Redirect != nil && r.Rewrite != nil {
		return nil, "requestRedirect and urlRewrite cannot be in one rule"
	}
	if r.Plain() {
		return nil, ""
	}
	return &r, ""
}

// cors reads a CORS filter; maxAge defaults to the API's 5 s.
func cors(f *gatewayv1.HTTPCORSFilter) *route.CORS {
	c := &route.CORS{Credentials: f.AllowCredentials != nil && *f.AllowCredentials, MaxAge: 5}
	if f.MaxAge != 0 {
		c.MaxAge = int(f.MaxAge)
	}
	for _, o := range f.AllowOrigins {
		c.AllowOrigins = append(c.AllowOrigins, string(o))
	}
	for _, m := range f.AllowMethods {
		c.AllowMethods = append(c.AllowMethods, string(m))
	}
	for _, h := range f.AllowHeaders {
		c.AllowHeaders = append(c.AllowHeaders, string(h))
	}
	for _, h := range f.ExposeHeaders {
		c.ExposeHeaders = append(c.ExposeHeaders, string(h))
	}
	return c
}

// pathModifier reads an HTTPPathModifier; the prefix a ReplacePrefixMatch
// replaces is filled in per match (withPrefix).
func pathModifier(p *gatewayv1.HTTPPathModifier) (*route.PathModifier, string) {
	switch p.Type {
	case gatewayv1.FullPathHTTPPathModifier:
		if p.ReplaceFullPath == nil {
			return nil, "ReplaceFullPath needs replaceFullPath"
		}
		return &route.PathModifier{Full: *p.ReplaceFullPath, IsFull: true}, ""
	case gatewayv1.PrefixMatchHTTPPathModifier:
		if p.ReplacePrefixMatch == nil {
			return nil, "ReplacePrefixMatch needs replacePrefixMatch"
		}
		return &route.PathModifier{Replace: *p.ReplacePrefixMatch}, ""
	}
	return nil, fmt.Sprintf("path modifier %s is not supported", p.Type)
}

func headerEdit(f *gatewayv1.HTTPHeaderFilter) *route.HeaderEdit {
	e := &route.HeaderEdit{Remove: f.Remove}
	for _, h := range f.Set {
		e.Set = append(e.Set, route.Header{Name: string(h.Name), Value: h.Value})
	}
	for _, h := range f.Add {
		e.Add = append(e.Add, route.Header{Name: string(h.Name), Value: h.Value})
	}
	return e
}

// ruleBackends resolves a rule's backendRefs into one route per backend
// with its weight. A backend that cannot be used keeps its share of the
// requests, answered 500 as the spec requires; reason and msg tell the
// first such (for ResolvedRefs).
func (b *builder) ruleBackends(r *routeIn, nn types.NamespacedName, ru *gatewayv1.HTTPRouteRule, hr *route.HTTPRule) (routes []*route.Route, weights []int32, total int32, reason, msg string) {
	fail := &route.Route{Ingress: nn, Backend: -1, Answer: http.StatusInternalServerError, HTTPRule: hr}
	if hr != nil && hr.Redirect != nil {
		// A redirect answers every request itself.
		return []*route.Route{{Ingress: nn, Backend: -1, HTTPRule: hr}}, []int32{1}, 1, "", ""
	}
	for _, br := range ru.BackendRefs {
		w := int32(1)
		if br.Weight != nil {
			w = *br.Weight
		}
		ref, cfg, why, problem := b.backendRef(r, &br.BackendRef)
		rt := fail
		if why == "" {
			rt = &route.Route{Ingress: nn, Backend: b.ref(ref), HTTPRule: withBackendFilters(hr, br.Filters), Config: cfg}
		} else if reason == "" {
			reason, msg = why, problem
		}
		if w == 0 {
			continue
		}
		routes, weights, total = append(routes, rt), append(weights, w), total+w
	}
	if total == 0 {
		// No backend, or only ones of weight 0: nothing to send to.
		return []*route.Route{fail}, []int32{1}, 1, reason, msg
	}
	return routes, weights, total, reason, msg
}

// withBackendFilters is hr with a backendRef's header modifiers (the
// only filters unsupportedRule lets through).
func withBackendFilters(hr *route.HTTPRule, fs []gatewayv1.HTTPRouteFilter) *route.HTTPRule {
	if len(fs) == 0 {
		return hr
	}
	out := route.HTTPRule{}
	if hr != nil {
		out = *hr
	}
	for _, f := range fs {
		switch {
		case f.Type == gatewayv1.HTTPRouteFilterRequestHeaderModifier && f.RequestHeaderModifier != nil:
			out.BackendRequestHeaders = headerEdit(f.RequestHeaderModifier)
		case f.Type == gatewayv1.HTTPRouteFilterResponseHeaderModifier && f.ResponseHeaderModifier != nil:
			out.BackendResponseHeaders = headerEdit(f.ResponseHeaderModifier)
		}
	}
	return &out
}

// h2c is the proxy's setting for backends whose Service port's
// appProtocol asks for HTTP/2 without TLS (GEP-1911); WebSocket
// (kubernetes.io/ws) needs none: upgrades pass through HTTP/1.1.
var h2c = &annotations.Config{BackendProtocol: annotations.H2C}

// backendRef checks one backendRef: a Service of the route's namespace,
// or of another that a ReferenceGrant opens to the route's, with a port
// the Service has. cfg is how the proxy speaks to it (nil: HTTP/1.1).
func (b *builder) backendRef(r *routeIn, br *gatewayv1.BackendRef) (ref route.BackendRef, cfg *annotations.Config, reason, msg string) {
	group, kind := "", kindService
	if br.Group != nil {
		group = string(*br.Group)
	}
	if br.Kind != nil {
		kind = string(*br.Kind)
	}
	if (group != "" && group != "core") || kind != kindService {
		return ref, nil, string(gatewayv1.RouteReasonInvalidKind), fmt.Sprintf("backendRef %s: kind %s/%s is not supported (Service is)", br.Name, group, kind)
	}
	ns := r.meta.Namespace
	if br.Namespace != nil {
		ns = string(*br.Namespace)
	}
	if ns != r.meta.Namespace && !b.granted(r.meta.Namespace, r.kind, ns, "", kindService, string(br.Name)) {
		return ref, nil, string(gatewayv1.RouteReasonRefNotPermitted), fmt.Sprintf("backendRef %s/%s: no ReferenceGrant in %s allows %ss of %s to refer to it", ns, br.Name, ns, r.kind, r.meta.Namespace)
	}
	if br.Port == nil {
		return ref, nil, string(gatewayv1.RouteReasonUnsupportedValue), fmt.Sprintf("backendRef %s/%s: a Service needs a port", ns, br.Name)
	}
	svc := b.in.Service(ns, string(br.Name))
	if svc == nil {
		return ref, nil, string(gatewayv1.RouteReasonBackendNotFound), fmt.Sprintf("backendRef %s/%s: Service not found", ns, br.Name)
	}
	i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == int32(*br.Port) })
	if i < 0 {
		return ref, nil, string(gatewayv1.RouteReasonBackendNotFound), fmt.Sprintf("backendRef %s/%s: the Service has no port %d", ns, br.Name, *br.Port)
	}
	if p := svc.Spec.Ports[i].AppProtocol; r.grpc || (p != nil && *p == "kubernetes.io/h2c") {
		cfg = h2c
	}
	return route.BackendRef{NamespacedName: types.NamespacedName{Namespace: ns, Name: string(br.Name)}, Port: int32(*br.Port)}, cfg, "", ""
}

// granted reports whether a ReferenceGrant in namespace to lets objects
// of fromKind (of the Gateway API's group) in namespace from refer to
// the object name of toGroup and toKind.
func (b *builder) granted(from, fromKind, to, toGroup, toKind, name string) bool {
	for _, g := range b.in.Grants {
		if g.Namespace != to {
			continue
		}
		fromOK := slices.ContainsFunc(g.Spec.From, func(f gatewayv1.ReferenceGrantFrom) bool {
			return f.Group == gatewayv1.GroupName && string(f.Kind) == fromKind && string(f.Namespace) == from
		})
		toOK := slices.ContainsFunc(g.Spec.To, func(t gatewayv1.ReferenceGrantTo) bool {
			group := string(t.Group)
			if group == "core" {
				group = ""
			}
			return group == toGroup && string(t.Kind) == toKind && (t.Name == nil || string(*t.Name) == name)
		})
		if fromOK && toOK {
			return true
		}
	}
	return false
}

// ref is a backend's index, added when new.
func (b *builder) ref(r route.BackendRef) int {
	if i, ok := b.backends[r]; ok {
		return i
	}
	b.backends[r] = len(b.out.Backends)
	b.out.Backends = append(b.out.Backends, r)
	return len(b.out.Backends) - 1
}
