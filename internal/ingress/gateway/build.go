package gateway

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/svcnet/svcnet/internal/ingress/route"
)

// Input is what the Gateways of svcnet's classes and their routes are
// compiled from, as the informers see it.
type Input struct {
	Controller gatewayv1.GatewayController
	Classes    []*gatewayv1.GatewayClass
	Gateways   []*gatewayv1.Gateway
	HTTPRoutes []*gatewayv1.HTTPRoute
	GRPCRoutes []*gatewayv1.GRPCRoute
	TLSRoutes  []*gatewayv1.TLSRoute
	Grants     []*gatewayv1.ReferenceGrant
	// Namespaces are the labels of each namespace, for listeners that
	// take routes from the namespaces a selector picks.
	Namespaces map[string]labels.Set
	// Service returns a backend Service, nil when there is none.
	Service func(namespace, name string) *corev1.Service
	// Infra is what each Gateway's Service tells: the proxy's port of
	// each listener port, and the addresses.
	Infra map[types.NamespacedName]Infra
	// Certificate returns the certificate of a kubernetes.io/tls Secret,
	// or why it cannot be served.
	Certificate func(namespace, name string) (*tls.Certificate, error)
	// Backends are the routes' backends so far (the Ingress table's);
	// the routes of the Gateways index them and add theirs.
	Backends []route.BackendRef
	// Now is the time of the conditions that change.
	Now metav1.Time
}

// Infra is a Gateway's Service as the routing needs it.
type Infra struct {
	// Ports maps each listener port to the proxy's port that serves it.
	Ports     map[int32]int32
	Addresses []string
}

// Output is the compiled routing and the status every object should
// have.
type Output struct {
	// ByPort routes the requests of each of the proxy's Gateway ports.
	ByPort   map[int]route.Router
	Backends []route.BackendRef
	// TLS are the certificates of the proxy ports that serve HTTPS
	// listeners, the most specific hostname first.
	TLS map[int][]TLSCert
	// TLSPorts are the proxy ports of TLS listeners, which carry TCP
	// chosen by SNI: each listener's hostname with its certificate when
	// it terminates TLS, nil when it passes the connection through; the
	// most specific hostname first.
	TLSPorts map[int][]TLSCert
	// Gateways are the served Gateways, with their status; Ports, the
	// listener ports each needs on its Service.
	Gateways []GatewayResult
	// Routes are the HTTPRoutes with a parent served here, with their
	// status (other controllers' parents kept as they were).
	Routes     []RouteResult
	GRPCRoutes []GRPCRouteResult
	TLSRoutes  []TLSRouteResult
}

// TLSRouteResult is one TLSRoute with a parent served here.
type TLSRouteResult struct {
	Route  *gatewayv1.TLSRoute
	Status gatewayv1.TLSRouteStatus
}

// TLSCert is the certificate of an HTTPS listener: served to clients
// whose SNI its hostname matches ("" matches every name).
type TLSCert struct {
	Hostname string
	Cert     *tls.Certificate
}

// Pick chooses the certificate for a TLS server name among a port's
// (ordered as Output.TLS): the most specific listener's that matches,
// else the last's, so that a client without SNI is still answered.
func Pick(certs []TLSCert, serverName string) *tls.Certificate {
	if len(certs) == 0 {
		return nil
	}
	name := route.NormalizeHost(serverName)
	for _, c := range certs {
		if c.Hostname == "" || hostMatches(c.Hostname, name) {
			return c.Cert
		}
	}
	return certs[len(certs)-1].Cert
}

// PickListener chooses, among a stream port's TLS listeners (ordered as
// Output.TLSPorts), the one a TLS server name goes to: the most specific
// hostname that matches. Its certificate is nil when it passes TLS
// through; ok is false when none matches.
func PickListener(ls []TLSCert, serverName string) (cert *tls.Certificate, ok bool) {
	name := route.NormalizeHost(serverName)
	for _, l := range ls {
		if l.Hostname == "" || hostMatches(l.Hostname, name) {
			return l.Cert, true
		}
	}
	return nil, false
}

// GatewayResult is one served Gateway.
type GatewayResult struct {
	Gateway *gatewayv1.Gateway
	Status  gatewayv1.GatewayStatus
	// Ports are the distinct ports of the Gateway's accepted listeners.
	Ports []int32
}

// GRPCRouteResult is one GRPCRoute with a parent served here.
type GRPCRouteResult struct {
	Route  *gatewayv1.GRPCRoute
	Status gatewayv1.GRPCRouteStatus
}

// RouteResult is one HTTPRoute with a parent served here.
type RouteResult struct {
	Route  *gatewayv1.HTTPRoute
	Status gatewayv1.HTTPRouteStatus
}

const (
	kindGateway   = "Gateway"
	kindHTTPRoute = "HTTPRoute"
	kindService   = "Service"
)

// Build compiles the Gateways of the classes whose controllerName is
// in.Controller and the HTTPRoutes attached to them. It is pure: the
// statuses carry in.Now where a condition changes.
func Build(in Input) Output {
	b := &builder{in: in, backends: map[route.BackendRef]int{}, out: Output{ByPort: map[int]route.Router{}, TLS: map[int][]TLSCert{}, TLSPorts: map[int][]TLSCert{}}}
	b.out.Backends = slices.Clone(in.Backends)
	for i, ref := range b.out.Backends {
		b.backends[ref] = i
	}
	classes := map[string]*gatewayv1.GatewayClass{}
	for _, gc := range in.Classes {
		if Serves(gc, in.Controller) {
			classes[gc.Name] = gc
		}
	}
	gws := slices.Clone(in.Gateways)
	slices.SortFunc(gws, func(a, b *gatewayv1.Gateway) int { return olderFirst(&a.ObjectMeta, &b.ObjectMeta) })
	for _, gw := range gws {
		if classes[string(gw.Spec.GatewayClassName)] != nil {
			b.gateways = append(b.gateways, b.gateway(gw))
		}
	}
	var routes []*routeIn
	for _, r := range in.HTTPRoutes {
		routes = append(routes, &routeIn{kind: kindHTTPRoute, meta: &r.ObjectMeta, spec: &r.Spec, parents: r.Status.Parents,
			done: func(st gatewayv1.RouteStatus) {
				b.out.Routes = append(b.out.Routes, RouteResult{Route: r, Status: gatewayv1.HTTPRouteStatus{RouteStatus: st}})
			}})
	}
	for _, r := range in.TLSRoutes {
		routes = append(routes, tlsRouteIn(r, func(st gatewayv1.RouteStatus) {
			b.out.TLSRoutes = append(b.out.TLSRoutes, TLSRouteResult{Route: r, Status: gatewayv1.TLSRouteStatus{RouteStatus: st}})
		}))
	}
	for _, r := range in.GRPCRoutes {
		routes = append(routes, grpcRouteIn(r, func(st gatewayv1.RouteStatus) {
			b.out.GRPCRoutes = append(b.out.GRPCRoutes, GRPCRouteResult{Route: r, Status: gatewayv1.GRPCRouteStatus{RouteStatus: st}})
		}))
	}
	slices.SortFunc(routes, func(a, b *routeIn) int { return olderFirst(a.meta, b.meta) })
	for i, r := range routes {
		b.attachRoute(r, i)
	}
	for _, g := range b.gateways {
		b.finish(g)
	}
	return b.out
}

type builder struct {
	in       Input
	backends map[route.BackendRef]int
	gateways []*gw
	out      Output
}

// gw is a served Gateway while it is built.
type gw struct {
	obj       *gatewayv1.Gateway
	nn        types.NamespacedName
	listeners []*listener
	// unsupported is why the Gateway as a whole is not accepted.
	unsupported string
}

type listener struct {
	spec     *gatewayv1.Listener
	hostname string
	kinds    []gatewayv1.RouteGroupKind
	accepted metav1.Condition
	resolved metav1.Condition
	conflict metav1.Condition
	// attachable: accepted and not conflicted, so routes attach (and
	// count in attachedRoutes) even while a reference is unresolved;
	// ok: attachable and servable, so it is programmed.
	attachable, ok bool
	cert           *tls.Certificate // an HTTPS or terminating TLS listener's
	// passthrough: a TLS listener whose connections go to the backends
	// as they are, chosen by SNI.
	passthrough bool
	attached    int32
	routes      listenerRoutes
	routeKeys   map[types.NamespacedName]bool
}

func olderFirst(a, b *metav1.ObjectMeta) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

func cond(t string, ok bool, reason, msg string, gen int64) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen}
}

// gateway validates a Gateway's listeners.
func (b *builder) gateway(obj *gatewayv1.Gateway) *gw {
	g := &gw{obj: obj, nn: types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}}
	gen := obj.Generation
	for _, a := range obj.Spec.Addresses {
		// An address without a value asks for one of the type, which
		// the edge gives (GEP-3185); a value of its own cannot be asked.
		if a.Value != "" || (a.Type != nil && *a.Type != gatewayv1.IPAddressType) {
			g.unsupported = "spec.addresses: svcnet assigns a Gateway's address from its edge; a requested value or a type other than IPAddress is not supported"
		}
	}
	for i := range obj.Spec.Listeners {
		s := &obj.Spec.Listeners[i]
		l := &listener{spec: s, routeKeys: map[types.NamespacedName]bool{}}
		if s.Hostname != nil {
			l.hostname = strings.ToLower(string(*s.Hostname))
		}
		l.accepted = cond(string(gatewayv1.ListenerConditionAccepted), true, string(gatewayv1.ListenerReasonAccepted), "", gen)
		l.resolved = cond(string(gatewayv1.ListenerConditionResolvedRefs), true, string(gatewayv1.ListenerReasonResolvedRefs), "", gen)
		l.conflict = cond(string(gatewayv1.ListenerConditionConflicted), false, string(gatewayv1.ListenerReasonNoConflicts), "", gen)
		switch s.Protocol {
		case gatewayv1.HTTPProtocolType:
			l.kinds, l.resolved = routeKinds(s, gen)
		case gatewayv1.HTTPSProtocolType:
			l.kinds, l.resolved = routeKinds(s, gen)
			if l.resolved.Status == metav1.ConditionTrue {
				l.cert, l.resolved = b.listenerCert(g, s, gen)
			} else {
				l.cert, _ = b.listenerCert(g, s, gen)
			}
		case gatewayv1.TLSProtocolType:
			l.kinds, l.resolved = tlsRouteKinds(s, gen)
			l.passthrough = s.TLS == nil || s.TLS.Mode == nil || *s.TLS.Mode == gatewayv1.TLSModePassthrough
			if !l.passthrough {
				cert, resolved := b.listenerCert(g, s, gen)
				if l.cert = cert; l.resolved.Status == metav1.ConditionTrue {
					l.resolved = resolved
				}
			}
		default:
			l.accepted = cond(string(gatewayv1.ListenerConditionAccepted), false, string(gatewayv1.ListenerReasonUnsupportedProtocol),
				fmt.Sprintf("protocol %s is not supported yet (HTTP, HTTPS and TLS are)", s.Protocol), gen)
		}
		g.listeners = append(g.listeners, l)
	}
	// Listeners on one port must agree on the protocol and differ in
	// hostname; those that do not are all Conflicted.
	for _, l := range g.listeners {
		for _, o := range g.listeners {
			if o == l || o.spec.Port != l.spec.Port {
				continue
			}
			if o.spec.Protocol != l.spec.Protocol {
				l.conflict = cond(string(gatewayv1.ListenerConditionConflicted), true, string(gatewayv1.ListenerReasonProtocolConflict),
					fmt.Sprintf("listener %s uses port %d with protocol %s", o.spec.Name, o.spec.Port, o.spec.Protocol), gen)
			} else if o.hostname == l.hostname && l.conflict.Status == metav1.ConditionFalse {
				l.conflict = cond(string(gatewayv1.ListenerConditionConflicted), true, string(gatewayv1.ListenerReasonHostnameConflict),
					fmt.Sprintf("listener %s has the same port and hostname", o.spec.Name), gen)
			}
		}
		needsCert := l.spec.Protocol == gatewayv1.HTTPSProtocolType || (l.spec.Protocol == gatewayv1.TLSProtocolType && !l.passthrough)
		l.attachable = l.accepted.Status == metav1.ConditionTrue && l.conflict.Status == metav1.ConditionFalse && g.unsupported == ""
		l.ok = l.attachable && (!needsCert || l.cert != nil)
	}
	return g
}

// routeKinds are the route kinds an HTTP or HTTPS listener takes:
// HTTPRoute and GRPCRoute, by default or those its allowedRoutes.kinds
// name; any other kind makes ResolvedRefs false.
func routeKinds(s *gatewayv1.Listener, gen int64) ([]gatewayv1.RouteGroupKind, metav1.Condition) {
	group := gatewayv1.Group(gatewayv1.GroupName)
	ok := cond(string(gatewayv1.ListenerConditionResolvedRefs), true, string(gatewayv1.ListenerReasonResolvedRefs), "", gen)
	if s.AllowedRoutes == nil || len(s.AllowedRoutes.Kinds) == 0 {
		return []gatewayv1.RouteGroupKind{{Group: &group, Kind: kindHTTPRoute}, {Group: &group, Kind: kindGRPCRoute}}, ok
	}
	var kinds []gatewayv1.RouteGroupKind
	var bad []string
	for _, k := range s.AllowedRoutes.Kinds {
		g := gatewayv1.Group(gatewayv1.GroupName)
		if k.Group != nil {
			g = *k.Group
		}
		if g == gatewayv1.GroupName && (k.Kind == kindHTTPRoute || k.Kind == kindGRPCRoute) {
			kinds = append(kinds, gatewayv1.RouteGroupKind{Group: &group, Kind: k.Kind})
		} else {
			bad = append(bad, string(g)+"/"+string(k.Kind))
		}
	}
	if len(bad) > 0 {
		return kinds, cond(string(gatewayv1.ListenerConditionResolvedRefs), false, string(gatewayv1.ListenerReasonInvalidRouteKinds),
			"route kinds not supported on an HTTP listener: "+strings.Join(bad, ", "), gen)
	}
	if kinds == nil {
		kinds = []gatewayv1.RouteGroupKind{}
	}
	return kinds, ok
}

// tlsRouteKinds are the route kinds a TLS listener takes: TLSRoute.
func tlsRouteKinds(s *gatewayv1.Listener, gen int64) ([]gatewayv1.RouteGroupKind, metav1.Condition) {
	group := gatewayv1.Group(gatewayv1.GroupName)
	ok := cond(string(gatewayv1.ListenerConditionResolvedRefs), true, string(gatewayv1.ListenerReasonResolvedRefs), "", gen)
	if s.AllowedRoutes == nil || len(s.AllowedRoutes.Kinds) == 0 {
		return []gatewayv1.RouteGroupKind{{Group: &group, Kind: kindTLSRoute}}, ok
	}
	kinds := []gatewayv1.RouteGroupKind{}
	var bad []string
	for _, k := range s.AllowedRoutes.Kinds {
		if (k.Group == nil || *k.Group == gatewayv1.GroupName) && k.Kind == kindTLSRoute {
			kinds = append(kinds, gatewayv1.RouteGroupKind{Group: &group, Kind: kindTLSRoute})
		} else {
			g := gatewayv1.GroupName
			if k.Group != nil {
				g = string(*k.Group)
			}
			bad = append(bad, g+"/"+string(k.Kind))
		}
	}
	if len(bad) > 0 {
		return kinds, cond(string(gatewayv1.ListenerConditionResolvedRefs), false, string(gatewayv1.ListenerReasonInvalidRouteKinds),
			"route kinds not supported on a TLS listener: "+strings.Join(bad, ", "), gen)
	}
	return kinds, ok
}

// allows reports whether a listener takes routes from namespace ns.
func (b *builder) allows(g *gw, l *listener, ns string) bool {
	from := gatewayv1.NamespacesFromSame
	var sel *metav1.LabelSelector
	if ar := l.spec.AllowedRoutes; ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		sel = ar.Namespaces.Selector
	}
	switch from {
	case gatewayv1.NamespacesFromAll:
		return true
	case gatewayv1.NamespacesFromSame:
		return ns == g.nn.Namespace
	case gatewayv1.NamespacesFromSelector:
		if sel == nil {
			return false
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		return err == nil && s.Matches(b.in.Namespaces[ns])
	}
	return false
}

// finish writes a Gateway's status and its routers.
func (b *builder) finish(g *gw) {
	gen := g.obj.Generation
	infra, hasInfra := b.in.Infra[g.nn]
	valid := 0
	var ports []int32
	st := gatewayv1.GatewayStatus{}
	for _, l := range g.listeners {
		if l.ok {
			valid++
			if !slices.Contains(ports, int32(l.spec.Port)) {
				ports = append(ports, int32(l.spec.Port))
			}
		}
	}
	slices.Sort(ports)
	programmed := hasInfra && len(infra.Addresses) > 0
	for _, l := range g.listeners {
		ls := gatewayv1.ListenerStatus{Name: l.spec.Name, SupportedKinds: l.kinds, AttachedRoutes: l.attached}
		if ls.SupportedKinds == nil {
			ls.SupportedKinds = []gatewayv1.RouteGroupKind{}
		}
		podPort, bound := infra.Ports[int32(l.spec.Port)]
		lp := cond(string(gatewayv1.ListenerConditionProgrammed), true, string(gatewayv1.ListenerReasonProgrammed), "", gen)
		switch {
		case !l.ok:
			lp = cond(string(gatewayv1.ListenerConditionProgrammed), false, string(gatewayv1.ListenerReasonInvalid), "the listener is not accepted or conflicts", gen)
		case !bound || !programmed:
			lp = cond(string(gatewayv1.ListenerConditionProgrammed), false, string(gatewayv1.ListenerReasonPending), "waiting for the Gateway's Service and address", gen)
		}
		ls.Conditions = merge(g.listenerConditions(l.spec.Name), b.in.Now, l.accepted, l.resolved, l.conflict, lp)
		st.Listeners = append(st.Listeners, ls)
		if l.ok && bound {
			b.addListener(int(podPort), l)
			if l.spec.Protocol == gatewayv1.TLSProtocolType {
				ls := append(b.out.TLSPorts[int(podPort)], TLSCert{Hostname: l.hostname, Cert: l.cert})
				slices.SortStableFunc(ls, func(a, b TLSCert) int { return bySpecificity(a.Hostname, b.Hostname) })
				b.out.TLSPorts[int(podPort)] = ls
			} else if l.cert != nil {
				certs := append(b.out.TLS[int(podPort)], TLSCert{Hostname: l.hostname, Cert: l.cert})
				slices.SortStableFunc(certs, func(a, b TLSCert) int { return bySpecificity(a.Hostname, b.Hostname) })
				b.out.TLS[int(podPort)] = certs
			}
		}
	}
	accepted := cond(string(gatewayv1.GatewayConditionAccepted), true, string(gatewayv1.GatewayReasonAccepted), "", gen)
	switch {
	case g.unsupported != "":
		accepted = cond(string(gatewayv1.GatewayConditionAccepted), false, string(gatewayv1.GatewayReasonUnsupportedAddress), g.unsupported, gen)
	case valid < len(g.listeners):
		accepted = cond(string(gatewayv1.GatewayConditionAccepted), valid > 0, string(gatewayv1.GatewayReasonListenersNotValid),
			fmt.Sprintf("%d of %d listeners are not valid", len(g.listeners)-valid, len(g.listeners)), gen)
	}
	prog := cond(string(gatewayv1.GatewayConditionProgrammed), true, string(gatewayv1.GatewayReasonProgrammed), "", gen)
	switch {
	case accepted.Status == metav1.ConditionFalse:
		prog = cond(string(gatewayv1.GatewayConditionProgrammed), false, string(gatewayv1.GatewayReasonInvalid), "the Gateway is not accepted", gen)
	case !programmed:
		prog = cond(string(gatewayv1.GatewayConditionProgrammed), false, string(gatewayv1.GatewayReasonAddressNotAssigned), "waiting for the edge to assign the Gateway's Service an address", gen)
	}
	st.Conditions = merge(g.obj.Status.Conditions, b.in.Now, accepted, prog)
	addrType := gatewayv1.IPAddressType
	for _, a := range infra.Addresses {
		st.Addresses = append(st.Addresses, gatewayv1.GatewayStatusAddress{Type: &addrType, Value: a})
	}
	b.out.Gateways = append(b.out.Gateways, GatewayResult{Gateway: g.obj, Status: st, Ports: ports})
}

// listenerConditions are the conditions a listener's status has now.
func (g *gw) listenerConditions(name gatewayv1.SectionName) []metav1.Condition {
	for _, ls := range g.obj.Status.Listeners {
		if ls.Name == name {
			return ls.Conditions
		}
	}
	return nil
}

// merge sets conds over old, keeping a condition's transition time while
// its status stays; conditions of other types in old are dropped.
func merge(old []metav1.Condition, now metav1.Time, conds ...metav1.Condition) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(conds))
	for _, c := range conds {
		c.LastTransitionTime = now
		if o := meta.FindStatusCondition(old, c.Type); o != nil && o.Status == c.Status {
			c.LastTransitionTime = o.LastTransitionTime
		}
		out = append(out, c)
	}
	return out
}

// addListener puts a listener's matches on the router of its proxy port.
func (b *builder) addListener(port int, l *listener) {
	pr, _ := b.out.ByPort[port].(*portRouter)
	if pr == nil {
		pr = &portRouter{}
		b.out.ByPort[port] = pr
	}
	lr := l.routes
	lr.hostname = l.hostname
	slices.SortStableFunc(lr.matches, byPrecedence)
	pr.listeners = append(pr.listeners, &lr)
	slices.SortStableFunc(pr.listeners, func(a, b *listenerRoutes) int { return bySpecificity(a.hostname, b.hostname) })
}

func bySpecificity(a, b string) int {
	ap, aa := specificity(a)
	bp, ba := specificity(b)
	return cmp.Or(cmp.Compare(bp, ap), cmp.Compare(ba, aa))
}

// byPrecedence is the spec's order of matches: the most specific
// hostname; an Exact path, then the longest prefix (a regular
// expression after both); a method; more header matches; more query
// matches; then the oldest route, its name, rule and match order.
func byPrecedence(a, b *match) int {
	if c := bySpecificity(a.host, b.host); c != 0 {
		return c
	}
	if c := cmp.Compare(a.path.kind, b.path.kind); c != 0 {
		return c
	}
	if a.path.kind == pathPrefix {
		if c := cmp.Compare(len(b.path.value), len(a.path.value)); c != 0 {
			return c
		}
	}
	if c := boolCmp(b.method != "", a.method != ""); c != 0 {
		return c
	}
	if c := cmp.Compare(len(b.header), len(a.header)); c != 0 {
		return c
	}
	if c := cmp.Compare(len(b.query), len(a.query)); c != 0 {
		return c
	}
	return a.order.compare(b.order)
}

// sortKey is a match's place among equally specific ones.
type sortKey struct{ route, rule, match int }

func (k sortKey) compare(o sortKey) int {
	return cmp.Or(cmp.Compare(k.route, o.route), cmp.Compare(k.rule, o.rule), cmp.Compare(k.match, o.match))
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// compileRegexp compiles a regular expression that must match the whole
// value, as Envoy's and most implementations' do.
func compileRegexp(expr string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + expr + ")$")
}

// listenerCert resolves an HTTPS listener's certificate: the first of
// its certificateRefs, a Secret of the Gateway's namespace or of another
// that a ReferenceGrant opens to Gateways of it. TLS passthrough is not
// an HTTPS listener's.
func (b *builder) listenerCert(g *gw, s *gatewayv1.Listener, gen int64) (*tls.Certificate, metav1.Condition) {
	bad := func(reason gatewayv1.ListenerConditionReason, format string, args ...any) (*tls.Certificate, metav1.Condition) {
		return nil, cond(string(gatewayv1.ListenerConditionResolvedRefs), false, string(reason), fmt.Sprintf(format, args...), gen)
	}
	if s.TLS == nil || len(s.TLS.CertificateRefs) == 0 {
		return bad(gatewayv1.ListenerReasonInvalidCertificateRef, "an HTTPS listener needs tls.certificateRefs")
	}
	if s.Protocol == gatewayv1.HTTPSProtocolType && s.TLS.Mode != nil && *s.TLS.Mode != gatewayv1.TLSModeTerminate {
		return bad(gatewayv1.ListenerReasonInvalidCertificateRef, "an HTTPS listener terminates TLS (mode %s is for TLS listeners)", *s.TLS.Mode)
	}
	ref := s.TLS.CertificateRefs[0]
	group, kind := "", "Secret"
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	if group != "" || kind != "Secret" {
		return bad(gatewayv1.ListenerReasonInvalidCertificateRef, "certificateRef %s: %s/%s is not a Secret", ref.Name, group, kind)
	}
	ns := g.nn.Namespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	if ns != g.nn.Namespace && !b.granted(g.nn.Namespace, kindGateway, ns, "", "Secret", string(ref.Name)) {
		return bad(gatewayv1.ListenerReasonRefNotPermitted, "certificateRef %s/%s: no ReferenceGrant in %s allows Gateways of %s to refer to it", ns, ref.Name, ns, g.nn.Namespace)
	}
	if b.in.Certificate == nil {
		return bad(gatewayv1.ListenerReasonInvalidCertificateRef, "certificateRef %s/%s: no certificates available", ns, ref.Name)
	}
	cert, err := b.in.Certificate(ns, string(ref.Name))
	if err != nil {
		return bad(gatewayv1.ListenerReasonInvalidCertificateRef, "certificateRef %s/%s: %v", ns, ref.Name, err)
	}
	return cert, cond(string(gatewayv1.ListenerConditionResolvedRefs), true, string(gatewayv1.ListenerReasonResolvedRefs), "", gen)
}
