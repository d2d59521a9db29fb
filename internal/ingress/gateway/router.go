package gateway

import (
	"math/rand/v2"
	"net/url"
	"regexp"
	"strings"

	"github.com/svcnet/svcnet/internal/ingress/route"
)

// portRouter routes the requests of one of the proxy's ports: one
// Gateway's listeners on one port.
type portRouter struct {
	listeners []*listenerRoutes // most specific hostname first
}

// listenerRoutes are the matches of the routes attached to one listener,
// in the spec's order of precedence.
type listenerRoutes struct {
	hostname string // "" for every host
	matches  []*match
}

// match is one match of one rule of an HTTPRoute, for one of the
// hostnames the route and the listener share.
type match struct {
	host   string // "" for every host
	path   pathMatch
	method string
	header []headerMatch
	query  []queryMatch
	// The rule's share: one route per backend, weights beside them.
	routes  []*route.Route
	weights []int32
	total   int32
	// order is the precedence after the match itself: route age, name,
	// rule and match index.
	order sortKey
}

type pathMatch struct {
	kind  pathKind
	value string // without the trailing slash for a prefix
	re    *regexp.Regexp
}

type pathKind int

const (
	pathExact pathKind = iota
	pathPrefix
	pathRegex
)

type headerMatch struct {
	name  string
	value string
	re    *regexp.Regexp
}

type queryMatch struct {
	name  string
	value string
	re    *regexp.Regexp
}

// Route picks the listener by the request's host, then the first of its
// matches that the request meets.
func (p *portRouter) Route(r *route.Request) *route.Route {
	host := route.NormalizeHost(r.Host)
	var query url.Values
	parsed := false
	for _, l := range p.listeners {
		if l.hostname != "" && !hostMatches(l.hostname, host) {
			continue
		}
		for _, m := range l.matches {
			if m.host != "" && !hostMatches(m.host, host) {
				continue
			}
			if !m.path.matches(r.Path) || (m.method != "" && m.method != r.Method) {
				continue
			}
			if !headersMatch(m.header, r) {
				continue
			}
			if len(m.query) > 0 && !parsed {
				if r.Query != nil {
					query, _ = url.ParseQuery(r.Query())
				}
				parsed = true
			}
			if !queryMatches(m.query, query) {
				continue
			}
			return m.pick()
		}
		// The most specific listener for the host decides.
		return nil
	}
	return nil
}

// BackendRefs is not used: the Mux holding the router has them.
func (p *portRouter) BackendRefs() []route.BackendRef { return nil }

// pick chooses a backend's route by weight.
func (m *match) pick() *route.Route {
	if len(m.routes) == 1 {
		return m.routes[0]
	}
	n := rand.Int32N(m.total)
	for i, w := range m.weights {
		if n < w {
			return m.routes[i]
		}
		n -= w
	}
	return m.routes[len(m.routes)-1]
}

func (p pathMatch) matches(path string) bool {
	switch p.kind {
	case pathExact:
		return path == p.value
	case pathPrefix:
		// Element by element: /foo matches /foo, /foo/ and /foo/bar,
		// not /foobar.
		if p.value == "" {
			return true
		}
		rest, ok := strings.CutPrefix(path, p.value)
		return ok && (rest == "" || rest[0] == '/')
	default:
		return p.re.MatchString(path)
	}
}

func headersMatch(ms []headerMatch, r *route.Request) bool {
	for _, h := range ms {
		v := r.Header(h.name)
		if h.re != nil {
			if !h.re.MatchString(v) {
				return false
			}
		} else if v != h.value {
			return false
		}
	}
	return true
}

func queryMatches(ms []queryMatch, q url.Values) bool {
	for _, m := range ms {
		vs, ok := q[m.name]
		if !ok {
			return false
		}
		// The first value counts, as the spec asks of repeated
		// parameters.
		if m.re != nil {
			if !m.re.MatchString(vs[0]) {
				return false
			}
		} else if vs[0] != m.value {
			return false
		}
	}
	return true
}
