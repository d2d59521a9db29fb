package convert

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// maxListeners is the most listeners a Gateway holds.
const maxListeners = 64

const httpListener = "http"

// listener is an HTTPS listener: one TLS host and its Secret.
type listener struct {
	name   string
	host   string
	secret types.NamespacedName
	// namespaces are those of the routes attached.
	namespaces []string
}

// tls makes the HTTPS listeners an Ingress's spec.tls asks for: one per
// host, with the Secret of the oldest Ingress that names the host, as
// ingress-nginx and svcnet ingress serve it. A TLS entry without hosts
// is for the Ingress's own hosts (svcnet ingress's reading).
func (c *converter) tls(ing *networkingv1.Ingress) {
	nn := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	if len(ing.Spec.TLS) > 0 && c.settings[nn].canary != nil {
		c.note(LeftOut, nn, "", "spec.tls of a canary Ingress is not used: the primary Ingress's applies")
		return
	}
	for i, t := range ing.Spec.TLS {
		hosts := t.Hosts
		if len(hosts) == 0 {
			for _, r := range ing.Spec.Rules {
				if r.Host != "" && !slices.Contains(hosts, r.Host) {
					hosts = append(hosts, r.Host)
				}
			}
		}
		for _, h := range hosts {
			switch l := c.byHost[h]; {
			case !validHost(h):
				c.note(LeftOut, nn, "", "spec.tls[%d] host %q is not a DNS name or *.<name>", i, h)
			case t.SecretName == "":
				c.note(LeftOut, nn, "", "spec.tls[%d] names no Secret for host %s (ingress-nginx served its default certificate): no HTTPS listener for it", i, h)
			case l == nil:
				l = &listener{name: c.listenerNames.unique(listenerName(h)), host: h, secret: types.NamespacedName{Namespace: ing.Namespace, Name: t.SecretName}}
				c.https = append(c.https, l)
				c.byHost[h] = l
			case l.secret != (types.NamespacedName{Namespace: ing.Namespace, Name: t.SecretName}):
				c.note(LeftOut, nn, "", "spec.tls[%d] host %s: the Secret %s of an older Ingress serves it; %s is not used", i, h, l.secret, t.SecretName)
			}
		}
	}
}

// listenerFor is the HTTPS listener that serves a host: its own, else a
// wildcard's that stands for it (one label, as an Ingress's wildcard);
// nil for none.
func (c *converter) listenerFor(host string) *listener {
	if host == "" {
		return nil
	}
	if l := c.byHost[host]; l != nil {
		return l
	}
	if i := strings.IndexByte(host, '.'); i > 0 && !strings.HasPrefix(host, "*.") {
		return c.byHost["*"+host[i:]]
	}
	return nil
}

// gateway makes the Gateway: the HTTP listener, then the HTTPS ones by
// hostname. Routes in other namespaces than the Gateway's are let in by
// name (allowedRoutes), listener by listener.
func (c *converter) gateway() error {
	if n := 1 + len(c.https); n > maxListeners {
		return fmt.Errorf("%d TLS hosts need %d listeners, and a Gateway holds %d: convert fewer Ingresses at a time (a namespace, or some files)", len(c.https), n, maxListeners)
	}
	gw := &gatewayv1.Gateway{
		TypeMeta:   metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{Namespace: c.gwns, Name: c.o.GatewayName},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(c.o.GatewayClass),
			Listeners: []gatewayv1.Listener{{Name: httpListener, Port: 80, Protocol: gatewayv1.HTTPProtocolType,
				AllowedRoutes: c.allowed(c.httpNamespaces)}},
		},
	}
	slices.SortFunc(c.https, func(a, b *listener) int { return cmp.Compare(a.host, b.host) })
	for _, l := range c.https {
		mode := gatewayv1.TLSModeTerminate
		ref := gatewayv1.SecretObjectReference{Name: gatewayv1.ObjectName(l.secret.Name)}
		if l.secret.Namespace != c.gwns {
			ns := gatewayv1.Namespace(l.secret.Namespace)
			ref.Namespace = &ns
		}
		host := gatewayv1.Hostname(l.host)
		gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayv1.Listener{
			Name: gatewayv1.SectionName(l.name), Hostname: &host, Port: 443, Protocol: gatewayv1.HTTPSProtocolType,
			TLS:           &gatewayv1.ListenerTLSConfig{Mode: &mode, CertificateRefs: []gatewayv1.SecretObjectReference{ref}},
			AllowedRoutes: c.allowed(l.namespaces),
		})
	}
	c.res.Gateway = gw
	return nil
}

// allowed lets the routes of namespaces other than the Gateway's attach
// (a listener takes its own namespace's alone by default), by the
// kubernetes.io/metadata.name label the API server gives every
// namespace.
func (c *converter) allowed(namespaces []string) *gatewayv1.AllowedRoutes {
	if !slices.ContainsFunc(namespaces, func(ns string) bool { return ns != c.gwns }) {
		return nil
	}
	ns := slices.Sorted(slices.Values(namespaces))
	from := gatewayv1.NamespacesFromSelector
	return &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &from, Selector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: ns}},
	}}}
}

// maxGrantTo is the most objects one ReferenceGrant names.
const maxGrantTo = 16

// grant is a reference across namespaces that a ReferenceGrant must
// let: from the objects of a kind in a namespace to one object.
type grant struct {
	to, fromNamespace string
	fromKind, kind    string
	name              string
}

// grants makes the ReferenceGrants: in each namespace with an object
// referred to from another, one per kind and namespace referring,
// naming the objects: the Gateway's Secrets, and the Services of
// canaries in other namespaces than their primary's routes.
func (c *converter) grants() {
	for _, l := range c.https {
		if l.secret.Namespace != c.gwns {
			c.refs = append(c.refs, grant{to: l.secret.Namespace, fromNamespace: c.gwns, fromKind: "Gateway", kind: "Secret", name: l.secret.Name})
		}
	}
	slices.SortFunc(c.refs, func(a, b grant) int {
		return cmp.Or(cmp.Compare(a.to, b.to), cmp.Compare(a.fromKind, b.fromKind), cmp.Compare(a.fromNamespace, b.fromNamespace),
			cmp.Compare(a.kind, b.kind), cmp.Compare(a.name, b.name))
	})
	c.refs = slices.Compact(c.refs)
	taken := map[string]names{}
	same := func(a, b grant) bool {
		return a.to == b.to && a.fromKind == b.fromKind && a.fromNamespace == b.fromNamespace
	}
	for refs := range chunkBy(c.refs, same) {
		first := refs[0]
		if taken[first.to] == nil {
			taken[first.to] = names{}
		}
		name := objectName("gateway", c.gwns, c.o.GatewayName)
		if first.fromKind != "Gateway" {
			name = objectName(strings.ToLower(first.fromKind)+"s", first.fromNamespace)
		}
		for chunk := range slices.Chunk(refs, maxGrantTo) {
			g := &gatewayv1.ReferenceGrant{
				TypeMeta:   metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "ReferenceGrant"},
				ObjectMeta: metav1.ObjectMeta{Namespace: first.to, Name: taken[first.to].unique(name)},
				Spec: gatewayv1.ReferenceGrantSpec{From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName,
					Kind: gatewayv1.Kind(first.fromKind), Namespace: gatewayv1.Namespace(first.fromNamespace)}}},
			}
			for _, r := range chunk {
				name := gatewayv1.ObjectName(r.name)
				g.Spec.To = append(g.Spec.To, gatewayv1.ReferenceGrantTo{Group: "", Kind: gatewayv1.Kind(r.kind), Name: &name})
			}
			c.res.ReferenceGrants = append(c.res.ReferenceGrants, g)
		}
	}
}

// chunkBy yields the runs of s whose elements are the same to same.
func chunkBy[T any](s []T, same func(a, b T) bool) func(func([]T) bool) {
	return func(yield func([]T) bool) {
		for i := 0; i < len(s); {
			j := i + 1
			for j < len(s) && same(s[i], s[j]) {
				j++
			}
			if !yield(s[i:j]) {
				return
			}
			i = j
		}
	}
}
