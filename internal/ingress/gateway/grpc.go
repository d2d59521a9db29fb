package gateway

import (
	"regexp"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// A GRPCRoute is served as the HTTPRoute it stands for: gRPC calls are
// HTTP/2 POSTs to /<service>/<method>, so a method match is a path match
// and the rest (hostnames, headers, filters, backends, status) is an
// HTTPRoute's, with HTTP/2 without TLS to the backends (or with it, as
// appProtocol says). The precedence of GRPCRoute matches (service, then
// method characters) follows from the paths': an exact method first,
// then a whole service, then regular expressions.

const kindGRPCRoute = "GRPCRoute"

// grpcRouteIn translates a GRPCRoute; done gets its status.
func grpcRouteIn(r *gatewayv1.GRPCRoute, done func(gatewayv1.RouteStatus)) *routeIn {
	spec := &gatewayv1.HTTPRouteSpec{CommonRouteSpec: r.Spec.CommonRouteSpec, Hostnames: r.Spec.Hostnames}
	for _, ru := range r.Spec.Rules {
		h := gatewayv1.HTTPRouteRule{Name: ru.Name, SessionPersistence: ru.SessionPersistence, Filters: httpFilters(ru.Filters)}
		for _, m := range ru.Matches {
			h.Matches = append(h.Matches, httpMatch(m))
		}
		for _, br := range ru.BackendRefs {
			h.BackendRefs = append(h.BackendRefs, gatewayv1.HTTPBackendRef{BackendRef: br.BackendRef, Filters: httpFilters(br.Filters)})
		}
		spec.Rules = append(spec.Rules, h)
	}
	return &routeIn{kind: kindGRPCRoute, meta: &r.ObjectMeta, spec: spec, parents: r.Status.Parents, grpc: true, done: done}
}

// httpMatch is a GRPCRoute match as an HTTPRoute's.
func httpMatch(m gatewayv1.GRPCRouteMatch) gatewayv1.HTTPRouteMatch {
	out := gatewayv1.HTTPRouteMatch{}
	for _, h := range m.Headers {
		t := gatewayv1.HeaderMatchExact
		if h.Type != nil && *h.Type == gatewayv1.GRPCHeaderMatchRegularExpression {
			t = gatewayv1.HeaderMatchRegularExpression
		}
		out.Headers = append(out.Headers, gatewayv1.HTTPHeaderMatch{Type: &t, Name: gatewayv1.HTTPHeaderName(h.Name), Value: h.Value})
	}
	mm := m.Method
	if mm == nil || (mm.Service == nil && mm.Method == nil) {
		return out // every method: PathPrefix /
	}
	regex := mm.Type != nil && *mm.Type == gatewayv1.GRPCMethodMatchRegularExpression
	var t gatewayv1.PathMatchType
	var v string
	switch {
	case !regex && mm.Service != nil && mm.Method != nil:
		t, v = gatewayv1.PathMatchExact, "/"+*mm.Service+"/"+*mm.Method
	case !regex && mm.Service != nil:
		t, v = gatewayv1.PathMatchPathPrefix, "/"+*mm.Service
	default:
		part := func(p *string, exact bool) string {
			switch {
			case p == nil:
				return "[^/]+"
			case exact:
				return regexp.QuoteMeta(*p)
			}
			return "(?:" + *p + ")"
		}
		t, v = gatewayv1.PathMatchRegularExpression, "/"+part(mm.Service, !regex)+"/"+part(mm.Method, !regex)
	}
	out.Path = &gatewayv1.HTTPPathMatch{Type: &t, Value: &v}
	return out
}

// httpFilters are GRPCRoute filters as HTTPRoute filters: the types
// share their names and configurations.
func httpFilters(fs []gatewayv1.GRPCRouteFilter) []gatewayv1.HTTPRouteFilter {
	var out []gatewayv1.HTTPRouteFilter
	for _, f := range fs {
		out = append(out, gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterType(f.Type),
			RequestHeaderModifier: f.RequestHeaderModifier, ResponseHeaderModifier: f.ResponseHeaderModifier,
			RequestMirror: f.RequestMirror, ExtensionRef: f.ExtensionRef})
	}
	return out
}
