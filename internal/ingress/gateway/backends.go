package gateway

// A rule's backendRefs: checked, indexed and weighted.

import (
	"fmt"
	"net/http"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/svcnet/svcnet/internal/ingress/annotations"
	"github.com/svcnet/svcnet/internal/ingress/route"
)

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
