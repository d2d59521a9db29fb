package gateway

import gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

// A TLSRoute sends the TCP connections of a TLS listener, chosen by the
// SNI of their ClientHello, to its backends: as they are when the
// listener passes TLS through, or after the proxy has terminated TLS.
// It is attached as an HTTPRoute without matches: its hostnames choose
// it, and its rules' weights choose the backend.

const kindTLSRoute = "TLSRoute"

// tlsRouteIn translates a TLSRoute; done gets its status.
func tlsRouteIn(r *gatewayv1.TLSRoute, done func(gatewayv1.RouteStatus)) *routeIn {
	spec := &gatewayv1.HTTPRouteSpec{CommonRouteSpec: r.Spec.CommonRouteSpec, Hostnames: r.Spec.Hostnames}
	for _, ru := range r.Spec.Rules {
		h := gatewayv1.HTTPRouteRule{Name: ru.Name}
		for _, br := range ru.BackendRefs {
			h.BackendRefs = append(h.BackendRefs, gatewayv1.HTTPBackendRef{BackendRef: br})
		}
		spec.Rules = append(spec.Rules, h)
	}
	return &routeIn{kind: kindTLSRoute, meta: &r.ObjectMeta, spec: spec, parents: r.Status.Parents, done: done}
}
