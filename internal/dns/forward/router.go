package forward

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Routes are where outside names go: Zones maps a domain (a stub domain,
// kube-dns's word) to its own servers, and Default takes every other
// name. Servers are host:port.
type Routes struct {
	Default []string
	Zones   map[string][]string
}

// Equal reports whether r and o send every name to the same servers.
func (r Routes) Equal(o Routes) bool {
	return slices.Equal(r.Default, o.Default) && maps.EqualFunc(r.Zones, o.Zones, slices.Equal)
}

// ErrNoRoute is returned for a name outside every zone when there is no
// default upstream.
var ErrNoRoute = errors.New("no upstream for this name")

// Router is the upstream of a DNS server whose outside names do not all
// go to the same servers: each question goes to the forwarder of the
// longest zone that holds its name, else to the default one. Every
// forwarder has its own cache and its own failover, so a stub domain's
// dead server never marks the default upstreams down; they share one set
// of metrics, told apart by the upstream label. Set changes the routes
// while questions are answered, as kube-dns follows its ConfigMap.
type Router struct {
	opts Options // every forwarder's, but its upstreams
	m    *metrics

	mu     sync.Mutex // serialises Set and Close
	closed bool
	table  atomic.Pointer[table]
}

type table struct {
	def   *Forwarder // nil: no default upstream
	zones map[string]*Forwarder
	// longest first, so that the first zone holding a name is the most
	// specific.
	order []string
}

// NewRouter returns a router for routes; opts are the settings of every
// forwarder (its Upstreams are ignored).
func NewRouter(opts Options, routes Routes) (*Router, error) {
	r := &Router{opts: opts}
	r.table.Store(&table{})
	m, err := newMetrics(opts.Registerer, r.cacheLen)
	if err != nil {
		return nil, err
	}
	r.m = m
	if err := r.Set(routes); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// CanonicalZone lowers a zone and makes it fully qualified, or says why
// it is no domain name.
func CanonicalZone(z string) (string, error) {
	c := strings.ToLower(dns.Fqdn(strings.TrimSpace(z)))
	if _, ok := dns.IsDomainName(c); !ok || c == "." {
		return "", fmt.Errorf("%q is not a domain name", z)
	}
	return c, nil
}

// Set makes routes the router's. A zone or the default whose servers are
// unchanged keeps its forwarder (cache, health and connections); one
// whose servers changed starts afresh, so that no answer of the old
// servers outlives them. Nothing changes when routes are invalid.
func (r *Router) Set(routes Routes) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("forward: router closed")
	}
	old := r.table.Load()
	next := &table{zones: map[string]*Forwarder{}}
	var created []*Forwarder
	fail := func(err error) error {
		for _, f := range created {
			f.Close()
		}
		return err
	}
	reuse := func(f *Forwarder, servers []string) (*Forwarder, error) {
		if f != nil && slices.Equal(f.Upstreams(), servers) {
			return f, nil
		}
		o := r.opts
		o.Upstreams = servers
		nf, err := newForwarder(o)
		if err != nil {
			return nil, err
		}
		nf.start(r.m)
		created = append(created, nf)
		return nf, nil
	}
	if len(routes.Default) > 0 {
		f, err := reuse(old.def, routes.Default)
		if err != nil {
			return fail(fmt.Errorf("default upstreams: %w", err))
		}
		next.def = f
	}
	for z, servers := range routes.Zones {
		cz, err := CanonicalZone(z)
		if err != nil {
			return fail(err)
		}
		if len(servers) == 0 {
			return fail(fmt.Errorf("zone %s: no servers", cz))
		}
		if _, dup := next.zones[cz]; dup {
			return fail(fmt.Errorf("zone %s given twice", cz))
		}
		f, err := reuse(old.zones[cz], servers)
		if err != nil {
			return fail(fmt.Errorf("zone %s: %w", cz, err))
		}
		next.zones[cz] = f
		next.order = append(next.order, cz)
	}
	slices.SortFunc(next.order, func(a, b string) int {
		if c := dns.CountLabel(b) - dns.CountLabel(a); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	r.table.Store(next)
	if old.def != nil && old.def != next.def {
		old.def.Close()
	}
	for z, f := range old.zones {
		if next.zones[z] != f {
			f.Close()
		}
	}
	return nil
}

// Routes returns the routes in use, zones canonical.
func (r *Router) Routes() Routes {
	t := r.table.Load()
	out := Routes{Zones: map[string][]string{}}
	if t.def != nil {
		out.Default = t.def.Upstreams()
	}
	for z, f := range t.zones {
		out.Zones[z] = f.Upstreams()
	}
	return out
}

// pick returns the forwarder for name (lower case, fully qualified).
func (t *table) pick(name string) *Forwarder {
	for _, z := range t.order {
		if dns.IsSubDomain(z, name) {
			return t.zones[z]
		}
	}
	return t.def
}

// Exchange answers q from the cache or an upstream of its route.
func (r *Router) Exchange(ctx context.Context, q dns.Question, do bool) (*dns.Msg, error) {
	f := r.table.Load().pick(strings.ToLower(dns.Fqdn(q.Name)))
	if f == nil {
		return nil, ErrNoRoute
	}
	return f.Exchange(ctx, q, do)
}

// Cached answers q from its route's cache alone.
func (r *Router) Cached(q dns.Question, do bool) (*dns.Msg, time.Time, bool) {
	f := r.table.Load().pick(strings.ToLower(dns.Fqdn(q.Name)))
	if f == nil {
		return nil, time.Time{}, false
	}
	return f.Cached(q, do)
}

// CountHit counts a cache hit answered by repeating an earlier answer.
func (r *Router) CountHit() { r.m.cacheHits.Inc() }

// Healthy reports how many upstreams of the default route are not
// marked down.
func (r *Router) Healthy() int {
	if f := r.table.Load().def; f != nil {
		return f.Healthy()
	}
	return 0
}

func (r *Router) cacheLen() int {
	t := r.table.Load()
	n := t.def.cacheLen()
	for _, f := range t.zones {
		n += f.cacheLen()
	}
	return n
}

// Close stops every forwarder.
func (r *Router) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	t := r.table.Load()
	if t.def != nil {
		t.def.Close()
	}
	for _, f := range t.zones {
		f.Close()
	}
}
