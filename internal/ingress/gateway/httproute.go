package gateway

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
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
