package convert

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Defaults of Options.
const (
	DefaultGatewayClass = "svcnet"
	DefaultGatewayName  = "ingress"
)

// ServiceLookup finds a Service; nil when it is not known. It resolves
// named Service ports (the Gateway API takes port numbers only) and
// tells whether a port already has the appProtocol an HTTP/2 backend
// needs.
type ServiceLookup func(namespace, name string) *corev1.Service

// Options are what the conversion is asked for besides the Ingresses.
type Options struct {
	GatewayClass string // "" is DefaultGatewayClass
	GatewayName  string // "" is DefaultGatewayName
	// GatewayNamespace is the Gateway's; "" is the namespace the
	// Ingresses share (an error when they do not share one).
	GatewayNamespace string
	// Services may be nil: named ports then cannot be resolved.
	Services ServiceLookup
}

// Result is the Gateway API's version of the Ingresses.
type Result struct {
	Gateway *gatewayv1.Gateway
	// ReferenceGrants let the Gateway use the certificates of Ingresses
	// in other namespaces than its own.
	ReferenceGrants []*gatewayv1.ReferenceGrant
	// HTTPRoutes, in the order of their Ingresses (oldest first): an
	// Ingress's in its own namespace and, when its hosts share their
	// paths, with its name.
	HTTPRoutes []*gatewayv1.HTTPRoute
	// Ingresses are those converted, oldest first.
	Ingresses []types.NamespacedName
	// Carried are the annotations of each Ingress that the objects
	// honour; every other one is named by a NotCarriedOver Note.
	Carried map[types.NamespacedName][]string
	// Notes, by Ingress (oldest first).
	Notes []Note
}

// Convert converts Ingresses. The error is for what leaves nothing to
// print: no Ingresses, no namespace for the Gateway, more HTTPS hosts
// than a Gateway holds; everything else is a Note.
func Convert(ingresses []*networkingv1.Ingress, o Options) (*Result, error) {
	if len(ingresses) == 0 {
		return nil, fmt.Errorf("no Ingresses to convert")
	}
	o.GatewayClass = cmp.Or(o.GatewayClass, DefaultGatewayClass)
	o.GatewayName = cmp.Or(o.GatewayName, DefaultGatewayName)
	ings := slices.Clone(ingresses)
	// Oldest first, as ingress-nginx (and svcnet ingress) give a
	// contested host or path to the oldest Ingress.
	slices.SortStableFunc(ings, func(a, b *networkingv1.Ingress) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	seen := map[types.NamespacedName]bool{}
	for _, ing := range ings {
		nn := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		if seen[nn] {
			return nil, fmt.Errorf("the Ingress %s is given twice", nn)
		}
		seen[nn] = true
	}
	gwns, err := gatewayNamespace(ings, o)
	if err != nil {
		return nil, err
	}
	for _, c := range []struct{ flag, v string }{{"--gateway-class", o.GatewayClass}, {"--gateway-name", o.GatewayName}} {
		if errs := validation.IsDNS1123Subdomain(c.v); len(errs) > 0 {
			return nil, fmt.Errorf("%s %q: %s", c.flag, c.v, strings.Join(errs, "; "))
		}
	}
	c := &converter{o: o, gwns: gwns, order: map[types.NamespacedName]int{},
		settings: map[types.NamespacedName]*settings{}, byHost: map[string]*listener{}, listenerNames: names{httpListener: true},
		primary: map[claimKey]*pathRule{}, claims: map[claimKey]types.NamespacedName{},
		names: map[string]names{}, res: &Result{Carried: map[types.NamespacedName][]string{}}}
	for i, ing := range ings {
		nn := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		c.order[nn] = i
		c.res.Ingresses = append(c.res.Ingresses, nn)
		s, carried, notes := parseSettings(nn, ing.Annotations, o.GatewayClass)
		c.settings[nn] = &s
		c.res.Carried[nn] = carried
		c.res.Notes = append(c.res.Notes, notes...)
		// Each Ingress keeps its name for its first HTTPRoute.
		c.namesOf(ing.Namespace)[ing.Name] = true
	}
	for _, ing := range ings {
		c.tls(ing)
	}
	var drafts []*draft
	for _, ing := range ings {
		if c.settingsOf(ing).canary == nil {
			drafts = append(drafts, c.draft(ing))
		}
	}
	for _, d := range drafts {
		c.defaultBackend(d)
	}
	for _, ing := range ings {
		if c.settingsOf(ing).canary != nil {
			c.addCanary(ing)
		}
	}
	for _, d := range drafts {
		c.routes(d)
	}
	if err := c.gateway(); err != nil {
		return nil, err
	}
	c.grants()
	// Notes by Ingress, oldest first; in the order made within one.
	slices.SortStableFunc(c.res.Notes, func(a, b Note) int { return cmp.Compare(c.order[a.Ingress], c.order[b.Ingress]) })
	return c.res, nil
}

// gatewayNamespace is the Gateway's namespace: the one asked for, else
// the one the Ingresses share.
func gatewayNamespace(ings []*networkingv1.Ingress, o Options) (string, error) {
	ns := o.GatewayNamespace
	if ns == "" {
		var all []string
		for _, ing := range ings {
			if !slices.Contains(all, ing.Namespace) {
				all = append(all, ing.Namespace)
			}
		}
		if len(all) > 1 {
			slices.Sort(all)
			return "", fmt.Errorf("the Ingresses are in namespaces %s: give the Gateway's with --gateway-namespace", strings.Join(all, ", "))
		}
		ns = all[0]
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return "", fmt.Errorf("gateway namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	return ns, nil
}

// converter holds the conversion under way.
type converter struct {
	o     Options
	gwns  string
	order map[types.NamespacedName]int // age rank
	// settings are the Ingresses' annotations read.
	settings map[types.NamespacedName]*settings
	// https are the HTTPS listeners, byHost by their hostname.
	https         []*listener
	byHost        map[string]*listener
	listenerNames names
	// httpNamespaces are those of the routes on the HTTP listener.
	httpNamespaces []string
	// primary is the rule a host's path became, by the path as written
	// (how a canary finds its primary); claims who has a host's match.
	primary map[claimKey]*pathRule
	claims  map[claimKey]types.NamespacedName
	// defaults are the claims of defaultBackends.
	defaults []claimKey
	// refs are the references across namespaces to grant.
	refs []grant
	// names given, per namespace.
	names map[string]names
	res   *Result
}

func (c *converter) settingsOf(ing *networkingv1.Ingress) *settings {
	return c.settings[types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}]
}

func (c *converter) namesOf(ns string) names {
	if c.names[ns] == nil {
		c.names[ns] = names{}
	}
	return c.names[ns]
}

func (c *converter) note(kind NoteKind, nn types.NamespacedName, annotation, format string, args ...any) {
	c.res.Notes = append(c.res.Notes, Note{Kind: kind, Ingress: nn, Annotation: annotation, Message: fmt.Sprintf(format, args...)})
}

// claimKey is a host's path: as written (with its type) for a canary to
// find its primary, or as matched to find two Ingresses that want it.
type claimKey struct {
	host, path string
	pathType   string
}

// validHost reports whether h is a host an HTTPRoute or a listener
// takes: a lower-case DNS name, or *. and one.
func validHost(h string) bool {
	name := strings.TrimPrefix(h, "*.")
	return len(validation.IsDNS1123Subdomain(name)) == 0 && len(validation.IsValidIP(nil, name)) > 0
}

func hostLabel(host string) string {
	if host == "" {
		return "every host"
	}
	return "host " + host
}
