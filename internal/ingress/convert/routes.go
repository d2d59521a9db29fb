package convert

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The HTTPRoute's limits.
const (
	maxHostnames    = 16
	maxRules        = 16
	maxRuleMatches  = 64
	maxRouteMatches = 128
)

// h2cAppProtocol is the Service port appProtocol that has svcnet (and
// other Gateway API implementations, GEP-1911) speak HTTP/2 without TLS.
const h2cAppProtocol = "kubernetes.io/h2c"

// forwardedProto is the header a load balancer that terminated TLS in
// front of the Gateway tells the scheme with.
const forwardedProto = "X-Forwarded-Proto"

// draft is a non-canary Ingress's paths by host, converted.
type draft struct {
	nn  types.NamespacedName
	ing *networkingv1.Ingress
	s   *settings
	// hosts in the order the rules give them ("" every host).
	hosts []string
	rules map[string][]*pathRule
	// caveats given, so that each is given once.
	caveats map[string]bool
}

func (c *converter) caveat(d *draft, annotation, msg string) {
	if !d.caveats[annotation+"\x00"+msg] {
		d.caveats[annotation+"\x00"+msg] = true
		c.note(Caveat, d.nn, annotation, "%s", msg)
	}
}

// claim adds a host's rule to the draft, unless the Ingress has its
// match already. Another Ingress's claim on it is a Caveat: both
// HTTPRoutes have it, and the Gateway API picks by their age.
func (c *converter) claim(d *draft, host string, pr *pathRule, what string) bool {
	key := claimKey{host: host, path: *pr.path.match.Value, pathType: string(*pr.path.match.Type)}
	switch owner, taken := c.claims[key]; {
	case taken && owner == d.nn:
		c.note(LeftOut, d.nn, "", "%s of %s: the Ingress has it twice; the first is kept", what, hostLabel(host))
		return false
	case taken:
		c.caveat(d, "", fmt.Sprintf("%s of %s is the older Ingress %s's too: ingress-nginx served it from %s, the Gateway API serves it from the HTTPRoute created first (then first by namespace/name)", what, hostLabel(host), owner, owner))
	default:
		c.claims[key] = d.nn
	}
	d.rules[host] = append(d.rules[host], pr)
	return true
}

// pathRule is one path of one host: what becomes an HTTPRoute rule.
type pathRule struct {
	// ns is the namespace of the Ingress, and of its HTTPRoute.
	ns      string
	path    pathOut
	backend gatewayv1.BackendRef
	canary  *canaryRule
}

// canaryRule is the canary Ingress attached to a path.
type canaryRule struct {
	nn      types.NamespacedName
	backend gatewayv1.BackendRef
	s       *canarySettings
}

// draft converts a non-canary Ingress's rules.
func (c *converter) draft(ing *networkingv1.Ingress) *draft {
	nn := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	d := &draft{nn: nn, ing: ing, s: c.settings[nn], rules: map[string][]*pathRule{}, caveats: map[string]bool{}}
	caveat := func(annotation, msg string) { c.caveat(d, annotation, msg) }
	usedRegex, usedFullRewrite := false, false
	for i, rule := range ing.Spec.Rules {
		host := rule.Host
		if host != "" && !validHost(host) {
			c.note(LeftOut, nn, "", "spec.rules[%d].host %q is not a DNS name or *.<name>: its paths are left out", i, host)
			continue
		}
		if !slices.Contains(d.hosts, host) {
			d.hosts = append(d.hosts, host)
			if strings.HasPrefix(host, "*.") {
				caveat("", fmt.Sprintf("host %s: a Gateway API wildcard stands for one label or more (a.b%s too), an Ingress's for one", host, host[1:]))
			}
		}
		if rule.HTTP == nil {
			continue
		}
		for _, p := range rule.HTTP.Paths {
			what := fmt.Sprintf("path %q", p.Path)
			out, cavs, problem := convertPath(p.Path, p.PathType, d.s)
			if problem != nil {
				if problem.annotation != "" {
					c.note(NotCarriedOver, nn, problem.annotation, "%s: %s", hostLabel(host), problem.message)
				} else {
					c.note(LeftOut, nn, "", "%s: %s", hostLabel(host), problem.message)
				}
				continue
			}
			for _, cv := range cavs {
				caveat("", cv)
			}
			be, why := c.backend(d, p.Backend)
			if why != "" {
				c.note(LeftOut, nn, "", "%s of %s: %s", what, hostLabel(host), why)
				continue
			}
			usedRegex = usedRegex || d.s.regex
			usedFullRewrite = usedFullRewrite || (d.s.nginxRewrite && out.rewrite != nil && out.rewrite.Type == gatewayv1.FullPathHTTPPathModifier)
			pr := &pathRule{ns: nn.Namespace, path: out, backend: be}
			if !c.claim(d, host, pr, what) {
				continue
			}
			written := claimKey{host: host, path: p.Path, pathType: string(pathTypeOf(p.PathType))}
			if c.primary[written] == nil {
				c.primary[written] = pr
			}
		}
	}
	if usedRegex {
		caveat(d.s.regexKey, "ingress-nginx read the Ingress's paths as regular expressions, case-insensitive and from the start of the path; here they are PathPrefix (by whole path elements) and Exact matches, case-sensitive")
	}
	if usedFullRewrite {
		caveat(d.s.rewriteKey, fmt.Sprintf("%q replaces the whole path (ReplaceFullPath), as ingress-nginx does; svcnet ingress replaced only the matched prefix (svcnet.dev/rewrite-target converts to ReplacePrefixMatch)", d.s.rewrite))
	}
	return d
}

// defaultBackend adds an Ingress's defaultBackend, after every
// Ingress's paths: ingress-nginx uses it for the paths of the hosts the
// Ingress names that no Ingress serves (the root location of their
// server), and for every host, as the catch-all, when the Ingress has
// no rules.
func (c *converter) defaultBackend(d *draft) {
	def := d.ing.Spec.DefaultBackend
	if def == nil {
		return
	}
	be, why := c.backend(d, *def)
	if why != "" {
		c.note(LeftOut, d.nn, "", "defaultBackend: %s", why)
		return
	}
	rw, cv := defaultRewrite(d.s)
	if cv != "" {
		c.caveat(d, d.s.rewriteKey, cv)
	}
	hosts := d.hosts
	if len(d.ing.Spec.Rules) == 0 {
		d.hosts, hosts = append(d.hosts, ""), []string{""}
	}
	for _, host := range hosts {
		if host == "" && len(d.ing.Spec.Rules) > 0 {
			continue // rules without a host name no host
		}
		key := claimKey{host: host, path: "/", pathType: string(gatewayv1.PathMatchPathPrefix)}
		if owner, taken := c.claims[key]; taken && owner != d.nn {
			if !slices.Contains(c.defaults, key) {
				c.note(LeftOut, d.nn, "", "the defaultBackend for %s: the Ingress %s serves its path / (as with ingress-nginx, the defaultBackend is not used there)", hostLabel(host), owner)
				continue
			}
		} else if taken {
			continue // the Ingress's own / path
		}
		c.defaults = append(c.defaults, key)
		c.claim(d, host, &pathRule{ns: d.nn.Namespace, path: pathOut{match: pathMatch(gatewayv1.PathMatchPathPrefix, "/"), rewrite: rw}, backend: be}, "the defaultBackend")
	}
}

func pathTypeOf(t *networkingv1.PathType) networkingv1.PathType {
	if t == nil {
		return networkingv1.PathTypeImplementationSpecific
	}
	return *t
}

// backend converts an Ingress backend; why tells what keeps it out.
func (c *converter) backend(d *draft, b networkingv1.IngressBackend) (gatewayv1.BackendRef, string) {
	if b.Resource != nil {
		return gatewayv1.BackendRef{}, fmt.Sprintf("its backend is a %s, which has no Gateway API equivalent", b.Resource.Kind)
	}
	if b.Service == nil || b.Service.Name == "" {
		return gatewayv1.BackendRef{}, "it has no backend Service"
	}
	ns, name := d.nn.Namespace, b.Service.Name
	var svc *corev1.Service
	if c.o.Services != nil {
		svc = c.o.Services(ns, name)
	}
	var port *corev1.ServicePort
	if svc != nil {
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			if (b.Service.Port.Name != "" && p.Name == b.Service.Port.Name) || (b.Service.Port.Name == "" && p.Port == b.Service.Port.Number) {
				port = p
			}
		}
	}
	number := b.Service.Port.Number
	switch {
	case b.Service.Port.Name != "" && port != nil:
		number = port.Port
	case b.Service.Port.Name != "" && svc != nil:
		return gatewayv1.BackendRef{}, fmt.Sprintf("Service %s/%s has no port named %q", ns, name, b.Service.Port.Name)
	case b.Service.Port.Name != "":
		return gatewayv1.BackendRef{}, fmt.Sprintf("the Gateway API takes port numbers, and port %q of Service %s/%s cannot be resolved to one: the Service is not among those read (with -f, give it too)", b.Service.Port.Name, ns, name)
	case number < 1 || number > 65535:
		return gatewayv1.BackendRef{}, fmt.Sprintf("Service %s/%s has no port number", ns, name)
	}
	if d.s.protocol != "" && (port == nil || port.AppProtocol == nil || *port.AppProtocol != h2cAppProtocol) {
		msg := fmt.Sprintf("set appProtocol: %s on port %d of Service %s/%s, for svcnet to speak HTTP/2 without TLS to its pods as ingress-nginx did", h2cAppProtocol, number, ns, name)
		if d.s.protocol == "GRPC" {
			msg += " (or write the route as a GRPCRoute, the Gateway API's kind for gRPC)"
		}
		if !slices.ContainsFunc(c.res.Notes, func(n Note) bool { return n.Ingress == d.nn && n.Message == msg }) {
			c.note(Caveat, d.nn, d.s.protocolKey, "%s", msg)
		}
	}
	p := gatewayv1.PortNumber(number)
	return gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name), Port: &p}}, ""
}

// addCanary attaches a canary Ingress's paths to the paths of the same
// host, path and type that another Ingress serves, as ingress-nginx
// does; a path that none serves is not served by its canary either.
func (c *converter) addCanary(ing *networkingv1.Ingress) {
	nn := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	s := c.settings[nn]
	d := &draft{nn: nn, s: s}
	if ing.Spec.DefaultBackend != nil {
		c.note(LeftOut, nn, "", "the defaultBackend of a canary Ingress is not carried over")
	}
	if s.canary.weight == 0 && s.canary.header == "" {
		c.note(LeftOut, nn, "", "nothing sends requests to this canary (no canary-weight above 0, no canary-by-header): its paths are left out")
		return
	}
	for _, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		for _, p := range rule.HTTP.Paths {
			where := fmt.Sprintf("path %q of %s", p.Path, hostLabel(rule.Host))
			pr := c.primary[claimKey{host: rule.Host, path: p.Path, pathType: string(pathTypeOf(p.PathType))}]
			switch {
			case pr == nil:
				c.note(LeftOut, nn, "", "%s: no other Ingress serves it, so neither does its canary", where)
				continue
			case pr.canary != nil:
				c.note(LeftOut, nn, "", "%s already has the older canary %s", where, pr.canary.nn)
				continue
			}
			be, why := c.backend(d, p.Backend)
			if why != "" {
				c.note(LeftOut, nn, "", "%s: %s", where, why)
				continue
			}
			if nn.Namespace != pr.ns {
				// The primary's route refers to the canary's Service
				// across namespaces.
				ns := gatewayv1.Namespace(nn.Namespace)
				be.Namespace = &ns
				c.refs = append(c.refs, grant{to: nn.Namespace, fromNamespace: pr.ns, fromKind: "HTTPRoute", kind: "Service", name: string(be.Name)})
			}
			pr.canary = &canaryRule{nn: nn, backend: be, s: s.canary}
		}
	}
}

// httpMode is what a host's plain HTTP does.
type httpMode int

const (
	// serve: the routes are served on the HTTP listener.
	serve httpMode = iota
	// redirect: plain HTTP is redirected to HTTPS, where the routes are.
	redirect
	// forwarded: force-ssl-redirect for a host with no certificate here
	// (TLS ends in front of the Gateway): plain HTTP is redirected, and
	// requests that a load balancer marks X-Forwarded-Proto: https are
	// served.
	forwarded
)

// mode is how ingress-nginx answers plain HTTP for a host: redirected
// to HTTPS when the host has a certificate (ssl-redirect, on by
// default), or always (force-ssl-redirect).
func (c *converter) mode(host string, s *settings) httpMode {
	covered := c.listenerFor(host) != nil
	switch {
	case s.forceSSLRedirect && covered:
		return redirect
	case s.forceSSLRedirect:
		return forwarded
	case s.sslRedirect && covered:
		return redirect
	}
	return serve
}

// group is hosts of one Ingress whose routes are the same: an HTTPRoute
// (its rules apply to every hostname it has).
type group struct {
	hosts []string
	mode  httpMode
	rules []gatewayv1.HTTPRouteRule
	key   string
}

// routes makes an Ingress's HTTPRoutes.
func (c *converter) routes(d *draft) {
	var groups []*group
	for _, host := range d.hosts {
		prs := d.rules[host]
		if len(prs) == 0 {
			continue
		}
		mode := c.mode(host, d.s)
		rules := renderRules(prs, d.s, mode == forwarded)
		b, _ := json.Marshal(rules)
		key := fmt.Sprintf("%d %s", mode, b)
		i := slices.IndexFunc(groups, func(g *group) bool { return g.key == key })
		if i < 0 {
			groups = append(groups, &group{mode: mode, rules: rules, key: key})
			i = len(groups) - 1
		}
		groups[i].hosts = append(groups[i].hosts, host)
	}
	if len(groups) == 0 {
		c.note(LeftOut, d.nn, "", "nothing of it could be converted: no HTTPRoute")
		return
	}
	var made []string
	for i, g := range groups {
		base := d.nn.Name
		if i > 0 {
			base = c.namesOf(d.nn.Namespace).unique(objectName(d.nn.Name, cmpHost(g.hosts[0])))
		}
		made = append(made, c.emit(d, g, base)...)
	}
	if len(groups) > 1 {
		c.note(Caveat, d.nn, "", "its hosts have different paths, and an HTTPRoute's rules apply to all its hostnames: HTTPRoutes %s", strings.Join(made, ", "))
	}
}

func cmpHost(h string) string {
	if h == "" {
		return "any-host"
	}
	return h
}

// renderRules turns a host's paths into HTTPRoute rules: one per path,
// its canary's by weight among its backendRefs, and a rule of its own
// for a canary's header (more header matches win). forwarded adds the
// X-Forwarded-Proto: https match to each.
func renderRules(prs []*pathRule, s *settings, forwarded bool) []gatewayv1.HTTPRouteRule {
	var rules []gatewayv1.HTTPRouteRule
	for _, pr := range prs {
		match := pr.path.match
		var filters []gatewayv1.HTTPRouteFilter
		if pr.path.rewrite != nil {
			rw := *pr.path.rewrite
			filters = append(filters, gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Path: &rw}})
		}
		if s.cors != nil {
			cors := *s.cors
			filters = append(filters, gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterCORS, CORS: &cors})
		}
		rule := func(headers []gatewayv1.HTTPHeaderMatch, backends ...gatewayv1.HTTPBackendRef) gatewayv1.HTTPRouteRule {
			if forwarded {
				headers = append(headers, gatewayv1.HTTPHeaderMatch{Name: forwardedProto, Value: "https"})
			}
			m := match
			return gatewayv1.HTTPRouteRule{
				Matches:     []gatewayv1.HTTPRouteMatch{{Path: &m, Headers: headers}},
				Filters:     filters,
				BackendRefs: backends,
				Timeouts:    s.timeouts,
			}
		}
		primary := gatewayv1.HTTPBackendRef{BackendRef: pr.backend}
		cr := pr.canary
		if cr == nil {
			rules = append(rules, rule(nil, primary))
			continue
		}
		canary := gatewayv1.HTTPBackendRef{BackendRef: cr.backend}
		if cr.s.weight > 0 {
			pw, cw := int32(cr.s.total-cr.s.weight), int32(cr.s.weight)
			p, k := primary, canary
			p.Weight, k.Weight = &pw, &cw
			rules = append(rules, rule(nil, p, k))
		} else {
			rules = append(rules, rule(nil, primary))
		}
		if h := gatewayv1.HTTPHeaderName(cr.s.header); h != "" {
			if cr.s.headerValue != "" {
				rules = append(rules, rule([]gatewayv1.HTTPHeaderMatch{{Name: h, Value: cr.s.headerValue}}, canary))
			} else {
				rules = append(rules, rule([]gatewayv1.HTTPHeaderMatch{{Name: h, Value: "always"}}, canary),
					rule([]gatewayv1.HTTPHeaderMatch{{Name: h, Value: "never"}}, primary))
			}
		}
	}
	return rules
}

// emit makes the HTTPRoutes of a group: the route, split when it holds
// more than an HTTPRoute may; and for a group whose plain HTTP is
// redirected, the redirecting route on the HTTP listener. It returns
// their names.
func (c *converter) emit(d *draft, g *group, base string) []string {
	ns := d.nn.Namespace
	parent := func(section string) gatewayv1.ParentReference {
		ref := gatewayv1.ParentReference{Name: gatewayv1.ObjectName(c.o.GatewayName), SectionName: (*gatewayv1.SectionName)(&section)}
		if ns != c.gwns {
			gwns := gatewayv1.Namespace(c.gwns)
			ref.Namespace = &gwns
		}
		return ref
	}
	attachHTTP := func() {
		if !slices.Contains(c.httpNamespaces, ns) {
			c.httpNamespaces = append(c.httpNamespaces, ns)
		}
	}
	var parents []gatewayv1.ParentReference
	if g.mode != redirect {
		parents = append(parents, parent(httpListener))
		attachHTTP()
	}
	for _, h := range g.hosts {
		l := c.listenerFor(h)
		if l == nil || slices.ContainsFunc(parents, func(p gatewayv1.ParentReference) bool { return string(*p.SectionName) == l.name }) {
			continue
		}
		parents = append(parents, parent(l.name))
		if !slices.Contains(l.namespaces, ns) {
			l.namespaces = append(l.namespaces, ns)
		}
	}
	if g.mode == forwarded {
		c.note(Caveat, d.nn, d.s.forceKey, "%s: no spec.tls, so no HTTPS listener here: plain HTTP is redirected to https, and requests with %s: https (from a load balancer that ended TLS in front of the Gateway) are served; ingress-nginx trusted that header only with use-forwarded-headers, and any client can send it",
			strings.Join(hostLabels(g.hosts), ", "), forwardedProto)
	}
	var made []string
	route := func(name string, parents []gatewayv1.ParentReference, hosts []string, rules []gatewayv1.HTTPRouteRule) {
		r := &gatewayv1.HTTPRoute{
			TypeMeta:   metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "HTTPRoute"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: slices.Clone(parents)},
				Rules:           rules,
			},
		}
		for _, h := range hosts {
			if h != "" {
				r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(h))
			}
		}
		c.res.HTTPRoutes = append(c.res.HTTPRoutes, r)
		made = append(made, name)
	}
	ruleChunks, merged := splitRules(g.rules)
	if merged {
		c.note(Caveat, d.nn, "", "%d rules are more than an HTTPRoute holds (%d rules, %d matches): rules that do the same were merged into one with a match per path", len(g.rules), maxRules, maxRouteMatches)
	}
	first := true
	var mains []string
	for hosts := range slices.Chunk(g.hosts, maxHostnames) {
		for _, rules := range ruleChunks {
			name := base
			if !first {
				name = c.namesOf(ns).unique(base)
			}
			first = false
			route(name, parents, hosts, rules)
			mains = append(mains, name)
		}
		if g.mode == redirect || g.mode == forwarded {
			attachHTTP()
			route(c.namesOf(ns).unique(objectName(base, "ssl-redirect")), []gatewayv1.ParentReference{parent(httpListener)}, hosts, redirectRules(g.rules))
		}
	}
	if len(mains) > 1 {
		c.note(Caveat, d.nn, "", "split over HTTPRoutes %s: an HTTPRoute holds %d hostnames, %d rules and %d matches", strings.Join(mains, ", "), maxHostnames, maxRules, maxRouteMatches)
	}
	return made
}

func hostLabels(hosts []string) []string {
	out := make([]string, len(hosts))
	for i, h := range hosts {
		out[i] = hostLabel(h)
	}
	return out
}

// redirectRules redirect the paths of rules to HTTPS, with the status
// ingress-nginx redirects with. They match the paths alone (no headers),
// so that the Ingresses that do not redirect the same host keep their
// own paths on plain HTTP, as with ingress-nginx, whose redirect is
// per path.
func redirectRules(rules []gatewayv1.HTTPRouteRule) []gatewayv1.HTTPRouteRule {
	var matches []gatewayv1.HTTPRouteMatch
	for _, r := range rules {
		for _, m := range r.Matches {
			pm := gatewayv1.HTTPRouteMatch{Path: m.Path}
			if !slices.ContainsFunc(matches, func(x gatewayv1.HTTPRouteMatch) bool {
				return *x.Path.Type == *pm.Path.Type && *x.Path.Value == *pm.Path.Value
			}) {
				matches = append(matches, pm)
			}
		}
	}
	scheme, code := "https", nginxRedirectCode
	filter := gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestRedirect,
		RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Scheme: &scheme, StatusCode: &code}}
	var out []gatewayv1.HTTPRouteRule
	for chunk := range slices.Chunk(matches, maxRuleMatches) {
		out = append(out, gatewayv1.HTTPRouteRule{Matches: chunk, Filters: []gatewayv1.HTTPRouteFilter{filter}})
	}
	return out
}

// splitRules fits rules into HTTPRoutes: as they are when they fit in
// one; else the rules that do the same (filters, backends, timeouts) are
// merged into one with all their matches, except those that replace
// a matched prefix (which the Gateway API allows with one match only),
// and the rules are shared out over as few HTTPRoutes as it takes.
func splitRules(rules []gatewayv1.HTTPRouteRule) (chunks [][]gatewayv1.HTTPRouteRule, merged bool) {
	if len(rules) <= maxRules && countMatches(rules) <= maxRouteMatches {
		return [][]gatewayv1.HTTPRouteRule{rules}, false
	}
	var all []gatewayv1.HTTPRouteRule
	var keys []string
	for _, r := range rules {
		action := r
		action.Matches = nil
		b, _ := json.Marshal(action)
		key := string(b)
		if i := slices.Index(keys, key); i >= 0 && !replacesPrefix(r) && len(all[i].Matches)+len(r.Matches) <= maxRuleMatches {
			all[i].Matches = append(slices.Clone(all[i].Matches), r.Matches...)
			continue
		}
		keys = append(keys, key)
		all = append(all, r)
	}
	var cur []gatewayv1.HTTPRouteRule
	for _, r := range all {
		if len(cur) == maxRules || countMatches(cur)+len(r.Matches) > maxRouteMatches {
			chunks = append(chunks, cur)
			cur = nil
		}
		cur = append(cur, r)
	}
	return append(chunks, cur), len(all) < len(rules)
}

func countMatches(rules []gatewayv1.HTTPRouteRule) int {
	n := 0
	for _, r := range rules {
		n += len(r.Matches)
	}
	return n
}

func replacesPrefix(r gatewayv1.HTTPRouteRule) bool {
	return slices.ContainsFunc(r.Filters, func(f gatewayv1.HTTPRouteFilter) bool {
		return f.URLRewrite != nil && f.URLRewrite.Path != nil && f.URLRewrite.Path.Type == gatewayv1.PrefixMatchHTTPPathModifier
	})
}
