package route

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/svcnet/svcnet/internal/ingress/annotations"
)

// BackendRef is a Service port that routes lead to: by number, or by
// name when Port is 0.
type BackendRef struct {
	types.NamespacedName
	PortName string
	Port     int32
}

// String is "namespace/name:port".
func (b BackendRef) String() string {
	if b.PortName != "" {
		return b.NamespacedName.String() + ":" + b.PortName
	}
	return b.NamespacedName.String() + ":" + strconv.Itoa(int(b.Port))
}

// Route is one path of one host, or a default backend. Routes in a Table
// are shared and must not be modified.
type Route struct {
	Ingress  types.NamespacedName
	Host     string // "" for every host, "*.foo.com" for a wildcard
	Path     string // "" for a default backend
	PathType networkingv1.PathType
	// Backend indexes Table.Backends.
	Backend int
	// RedirectHTTPS answers plain HTTP with a 308 to https: the route's
	// host has TLS and its Ingress did not opt out.
	RedirectHTTPS bool
	// Config is what the Ingress's annotations ask for, shared by its
	// routes.
	Config *annotations.Config
	// Canary, when set, is the route of a canary Ingress for the same
	// host and path: the requests its Rule picks go to its Backend.
	Canary *Route
	// Rule is a canary route's selection (nil on other routes).
	Rule *annotations.Canary
	// Answer, when not zero, is the status the proxy answers with
	// instead of forwarding (Backend is then -1): a Gateway API rule's
	// share of backends that cannot be used gets 500, as the spec says.
	Answer int
	// HTTPRule is what the Gateway API rule the route comes from does
	// besides forwarding (nil for an Ingress's routes; Ingress then
	// names the HTTPRoute). A redirect has no backend either (-1).
	HTTPRule *HTTPRule
}

// TLSHost is a host served over TLS with the certificate of a Secret.
type TLSHost struct {
	Host    string // exact, or a wildcard *.foo.com
	Secret  types.NamespacedName
	Ingress types.NamespacedName
}

// Problem is something wrong with one Ingress, for a Warning event on it.
// The rest of the Ingress is still served.
type Problem struct {
	Ingress types.NamespacedName
	Reason  string
	Message string
}

// Reasons of Problems.
const (
	ReasonConflict           = "RouteConflict"
	ReasonInvalidHost        = "InvalidHost"
	ReasonInvalidPath        = "InvalidPath"
	ReasonUnsupportedBackend = "UnsupportedBackend"
	ReasonInvalidAnnotation  = "InvalidAnnotation"
	ReasonUnsupported        = "UnsupportedAnnotation"
)

// Table is an immutable routing table.
type Table struct {
	exact    map[string]*hostRoutes
	wildcard map[string]*hostRoutes // by the suffix after "*."
	anyHost  *hostRoutes
	catchAll *Route
	// Backends are the distinct backends of the routes, in first-use
	// order: the proxy keeps its upstreams in a slice beside them.
	Backends []BackendRef
	// TLS lists the hosts of spec.tls, each with the Secret of the oldest
	// Ingress that names it.
	TLS    []TLSHost
	routes int
}

// hostRoutes are the paths of one host.
type hostRoutes struct {
	exact  map[string]*Route
	prefix map[string]*Route // by the prefix without its trailing slash ("" for "/")
	def    *Route            // the default backend of the host's Ingress
}

// Len is the number of routes, defaults included.
func (t *Table) Len() int { return t.routes }

// Build merges the Ingresses (all of one class) into a Table, the oldest
// first. Whatever of an Ingress cannot be served is left out and reported.
func Build(ingresses []*networkingv1.Ingress) (*Table, []Problem) {
	b := builder{
		t:        &Table{exact: map[string]*hostRoutes{}, wildcard: map[string]*hostRoutes{}},
		backends: map[BackendRef]int{},
		owner:    map[claim]types.NamespacedName{},
	}
	ings := slices.Clone(ingresses)
	slices.SortFunc(ings, olderFirst)
	// Canaries attach to the routes of the others: those first.
	var canaries []canaryOf
	for _, ing := range ings {
		if c := b.add(ing); c.cfg != nil {
			canaries = append(canaries, c)
		}
	}
	for _, c := range canaries {
		b.addCanary(c.ing, c.cfg)
	}
	return b.t, b.problems
}

// canaryOf is a canary Ingress with its parsed annotations.
type canaryOf struct {
	ing *networkingv1.Ingress
	cfg *annotations.Config
}

// olderFirst orders Ingresses by creation time, then namespace and name.
func olderFirst(a, b *networkingv1.Ingress) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// claim is what two Ingresses may both want: a host's path of one type,
// or a host's default backend (Path "", PathType ""), or the catch-all.
type claim struct {
	host, path string
	pathType   networkingv1.PathType
	catchAll   bool
	tls        bool
}

type builder struct {
	t        *Table
	backends map[BackendRef]int
	owner    map[claim]types.NamespacedName
	problems []Problem
}

func (b *builder) problem(ing types.NamespacedName, reason, format string, args ...any) {
	b.problems = append(b.problems, Problem{Ingress: ing, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// take records that ing owns c, or reports that an older Ingress does.
func (b *builder) take(ing types.NamespacedName, c claim, what string) bool {
	if w, ok := b.owner[c]; ok {
		if w != ing {
			b.problem(ing, ReasonConflict, "%s is served by the older Ingress %s", what, w)
		}
		return false
	}
	b.owner[c] = ing
	return true
}

// add adds an Ingress's routes; a canary is returned for addCanary.
func (b *builder) add(ing *networkingv1.Ingress) canaryOf {
	nn := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	cfg, probs := annotations.Parse(ing.Annotations)
	fatal := false
	for _, p := range probs {
		reason := ReasonUnsupported
		if p.Fatal {
			reason, fatal = ReasonInvalidAnnotation, true
		}
		b.problem(nn, reason, "annotation %s: %s", p.Annotation, p.Message)
	}
	if fatal {
		b.problem(nn, ReasonInvalidAnnotation, "not served until its annotations are fixed")
		return canaryOf{}
	}
	if cfg.Canary != nil {
		return canaryOf{ing: ing, cfg: &cfg}
	}
	redirect := cfg.SSLRedirect
	tlsHosts := b.tls(nn, ing)
	var def *Route
	if d := ing.Spec.DefaultBackend; d != nil {
		if ref, ok := b.backend(nn, ing.Namespace, d, "defaultBackend"); ok {
			def = &Route{Ingress: nn, Backend: b.ref(ref), Config: &cfg}
		}
	}
	if len(ing.Spec.Rules) == 0 {
		if def != nil && b.take(nn, claim{catchAll: true}, "the catch-all default backend") {
			b.t.catchAll = def
			b.t.routes++
		}
		return canaryOf{}
	}
	defaulted := map[string]bool{}
	onHost := func(host string) {
		if def == nil || defaulted[host] {
			return
		}
		defaulted[host] = true
		if b.take(nn, claim{host: host}, "the default backend of "+hostLabel(host)) {
			b.hostRoutes(host).def = &Route{Ingress: nn, Host: host, Backend: def.Backend, RedirectHTTPS: redirect && coveredBy(host, tlsHosts), Config: &cfg}
			b.t.routes++
		}
	}
	b.rulePaths(nn, ing, onHost, func(host, key string, pathType networkingv1.PathType, path string, ref BackendRef) {
		what := fmt.Sprintf("%s path %s of %s", pathType, path, hostLabel(host))
		if !b.take(nn, claim{host: host, path: key, pathType: pathType}, what) {
			return
		}
		r := &Route{Ingress: nn, Host: host, Path: path, PathType: pathType, Backend: b.ref(ref),
			RedirectHTTPS: redirect && coveredBy(host, tlsHosts), Config: &cfg}
		hr := b.hostRoutes(host)
		if pathType == networkingv1.PathTypeExact {
			hr.exact[key] = r
		} else {
			hr.prefix[key] = r
		}
		b.t.routes++
	})
	return canaryOf{}
}

// ReasonCanary is a canary that cannot be attached.
const ReasonCanary = "CanaryNotServed"

// addCanary attaches a canary Ingress's paths to the routes of the same
// host, path and type that another Ingress serves: requests the canary's
// rules pick go to its backend, with the route's other settings. A path
// no other Ingress serves is not served by the canary alone, as in
// ingress-nginx; the oldest canary of a route wins.
func (b *builder) addCanary(ing *networkingv1.Ingress, cfg *annotations.Config) {
	nn := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	b.rulePaths(nn, ing, nil, func(host, key string, pathType networkingv1.PathType, path string, ref BackendRef) {
		primary := b.lookup(host, key, pathType)
		if primary == nil {
			b.problem(nn, ReasonCanary, "%s path %s of %s: no other Ingress serves it, so neither does its canary", pathType, path, hostLabel(host))
			return
		}
		if primary.Canary != nil {
			b.problem(nn, ReasonConflict, "%s path %s of %s already has the older canary %s", pathType, path, hostLabel(host), primary.Canary.Ingress)
			return
		}
		canary := *primary
		canary.Ingress, canary.Backend, canary.Canary, canary.Rule = nn, b.ref(ref), nil, cfg.Canary
		primary.Canary = &canary
	})
}

// rulePaths walks an Ingress's rules: each valid host goes to onHost (if
// any), each valid path with a usable backend to onPath; whatever is
// invalid is reported and skipped.
func (b *builder) rulePaths(nn types.NamespacedName, ing *networkingv1.Ingress, onHost func(host string),
	onPath func(host, key string, pathType networkingv1.PathType, path string, ref BackendRef)) {
	for i, rule := range ing.Spec.Rules {
		host, ok := ruleHost(rule.Host)
		if !ok {
			b.problem(nn, ReasonInvalidHost, "spec.rules[%d].host %q is not a DNS name or a wildcard *.<name>", i, rule.Host)
			continue
		}
		if onHost != nil {
			onHost(host)
		}
		if rule.HTTP == nil {
			continue
		}
		for j, p := range rule.HTTP.Paths {
			field := fmt.Sprintf("spec.rules[%d].http.paths[%d]", i, j)
			pathType, key, ok := rulePath(p)
			if !ok {
				b.problem(nn, ReasonInvalidPath, "%s.path %q is not a valid %s path", field, p.Path, pathTypeName(p.PathType))
				continue
			}
			if ref, ok := b.backend(nn, ing.Namespace, &p.Backend, field+".backend"); ok {
				onPath(host, key, pathType, p.Path, ref)
			}
		}
	}
}

// lookup finds the route a non-canary Ingress made for a host's path.
func (b *builder) lookup(host, key string, t networkingv1.PathType) *Route {
	var hr *hostRoutes
	switch {
	case host == "":
		hr = b.t.anyHost
	case strings.HasPrefix(host, "*."):
		hr = b.t.wildcard[host[2:]]
	default:
		hr = b.t.exact[host]
	}
	if hr == nil {
		return nil
	}
	if t == networkingv1.PathTypeExact {
		return hr.exact[key]
	}
	return hr.prefix[key]
}

// tls records the Ingress's TLS hosts (the oldest Ingress's Secret wins
// a host) and returns every host it lists, won or not: its routes on
// those hosts redirect to HTTPS either way.
func (b *builder) tls(ing types.NamespacedName, in *networkingv1.Ingress) []string {
	var hosts []string
	for i, t := range in.Spec.TLS {
		names := t.Hosts
		if len(names) == 0 {
			// No hosts: the certificate is for the Ingress's own hosts.
			for _, r := range in.Spec.Rules {
				if r.Host != "" {
					names = append(names, r.Host)
				}
			}
		}
		for j, h := range names {
			host, ok := ruleHost(h)
			if !ok || host == "" {
				b.problem(ing, ReasonInvalidHost, "spec.tls[%d].hosts[%d] %q is not a DNS name or a wildcard *.<name>", i, j, h)
				continue
			}
			hosts = append(hosts, host)
			if t.SecretName == "" {
				continue // the default certificate
			}
			if !b.take(ing, claim{host: host, tls: true}, "the certificate of host "+host) {
				continue
			}
			b.t.TLS = append(b.t.TLS, TLSHost{Host: host, Ingress: ing,
				Secret: types.NamespacedName{Namespace: in.Namespace, Name: t.SecretName}})
		}
	}
	return hosts
}

// coveredBy reports whether a rule's host is one of the TLS hosts, or
// matched by one of their wildcards.
func coveredBy(host string, tlsHosts []string) bool {
	if host == "" {
		return false
	}
	for _, h := range tlsHosts {
		if h == host {
			return true
		}
		if strings.HasPrefix(h, "*.") && !strings.HasPrefix(host, "*.") {
			if i := strings.IndexByte(host, '.'); i > 0 && host[i+1:] == h[2:] {
				return true
			}
		}
	}
	return false
}

func hostLabel(host string) string {
	if host == "" {
		return "every host"
	}
	return "host " + host
}

func pathTypeName(t *networkingv1.PathType) string {
	if t == nil {
		return string(networkingv1.PathTypeImplementationSpecific)
	}
	return string(*t)
}

func (b *builder) hostRoutes(host string) *hostRoutes {
	newRoutes := func() *hostRoutes {
		return &hostRoutes{exact: map[string]*Route{}, prefix: map[string]*Route{}}
	}
	if host == "" {
		if b.t.anyHost == nil {
			b.t.anyHost = newRoutes()
		}
		return b.t.anyHost
	}
	m, key := b.t.exact, host
	if strings.HasPrefix(host, "*.") {
		m, key = b.t.wildcard, host[2:]
	}
	hr := m[key]
	if hr == nil {
		hr = newRoutes()
		m[key] = hr
	}
	return hr
}

func (b *builder) ref(r BackendRef) int {
	if i, ok := b.backends[r]; ok {
		return i
	}
	b.backends[r] = len(b.t.Backends)
	b.t.Backends = append(b.t.Backends, r)
	return len(b.t.Backends) - 1
}

// backend checks an IngressBackend: a Service and a port by number or
// name. Resource backends are not supported.
func (b *builder) backend(ing types.NamespacedName, ns string, be *networkingv1.IngressBackend, field string) (BackendRef, bool) {
	s := be.Service
	switch {
	case s == nil && be.Resource != nil:
		b.problem(ing, ReasonUnsupportedBackend, "%s: resource backends (%s %s) are not supported; use a Service", field, be.Resource.Kind, be.Resource.Name)
		return BackendRef{}, false
	case s == nil:
		b.problem(ing, ReasonUnsupportedBackend, "%s names no Service", field)
		return BackendRef{}, false
	case len(validation.IsDNS1123Label(s.Name)) > 0:
		b.problem(ing, ReasonUnsupportedBackend, "%s.service.name %q is not a Service name", field, s.Name)
		return BackendRef{}, false
	case s.Port.Name != "" && s.Port.Number != 0, s.Port.Name == "" && s.Port.Number == 0:
		b.problem(ing, ReasonUnsupportedBackend, "%s.service.port needs exactly one of name and number", field)
		return BackendRef{}, false
	case s.Port.Number < 0 || s.Port.Number > 65535:
		b.problem(ing, ReasonUnsupportedBackend, "%s.service.port.number %d is out of range", field, s.Port.Number)
		return BackendRef{}, false
	}
	return BackendRef{NamespacedName: types.NamespacedName{Namespace: ns, Name: s.Name}, PortName: s.Port.Name, Port: s.Port.Number}, true
}

// ruleHost lower-cases and checks a rule's host.
func ruleHost(h string) (string, bool) {
	if h == "" {
		return "", true
	}
	h = strings.ToLower(h)
	if strings.HasPrefix(h, "*.") {
		return h, len(validation.IsWildcardDNS1123Subdomain(h)) == 0
	}
	return h, len(validation.IsDNS1123Subdomain(h)) == 0
}

// Path sequences the API rejects in Exact and Prefix paths: they would
// make the same request match differently here and at the backend.
var (
	badSequences = []string{"//", "/./", "/../", "%2f", "%2F", "#"}
	badSuffixes  = []string{"/..", "/."}
)

// rulePath checks a path and returns its type (ImplementationSpecific
// becomes Prefix) and its key in the host's map.
func rulePath(p networkingv1.HTTPIngressPath) (networkingv1.PathType, string, bool) {
	t := networkingv1.PathTypeImplementationSpecific
	if p.PathType != nil {
		t = *p.PathType
	}
	path := p.Path
	switch t {
	case networkingv1.PathTypeImplementationSpecific:
		if path == "" {
			path = "/"
		}
		t = networkingv1.PathTypePrefix
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
	default:
		return "", "", false
	}
	if !strings.HasPrefix(path, "/") {
		return "", "", false
	}
	for _, s := range badSequences {
		if strings.Contains(path, s) {
			return "", "", false
		}
	}
	for _, s := range badSuffixes {
		if strings.HasSuffix(path, s) {
			return "", "", false
		}
	}
	if t == networkingv1.PathTypePrefix {
		return t, strings.TrimSuffix(path, "/"), true
	}
	return t, path, true
}
