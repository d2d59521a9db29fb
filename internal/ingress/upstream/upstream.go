package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/ingress/route"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// Upstream is the set of endpoints behind one backend (a Service port).
// Its endpoints are swapped atomically when the EndpointSlices change,
// without rebuilding the routing table; requests in flight keep the set
// they started with.
type Upstream struct {
	Ref  route.BackendRef
	eps  atomic.Pointer[endpointSet] // never nil
	next atomic.Uint32               // round robin

	// tunnels are the upgraded connections (WebSocket …) to its pods, by
	// pod: they are closed when their pod leaves the endpoints or the
	// backend leaves the routing table, and never on other changes.
	mu      sync.Mutex
	tunnels map[*upgraded]string
}

// endpointSet is one version of an upstream's endpoints.
type endpointSet struct {
	addrs []string       // "ip:port"
	ids   map[string]int // affinity cookie value -> index in addrs
}

func newUpstream(ref route.BackendRef) *Upstream {
	u := &Upstream{Ref: ref}
	u.eps.Store(&endpointSet{})
	return u
}

// Endpoints returns the current addresses ("ip:port").
func (u *Upstream) Endpoints() []string { return u.eps.Load().addrs }

// affinityID is what an affinity cookie holds for an endpoint: a digest of
// its address, the same in every replica of the ingress (as
// ingress-nginx's), which does not show the pod's address.
func affinityID(addr string) string {
	sum := sha256.Sum256([]byte(addr))
	return hex.EncodeToString(sum[:8])
}

// pick returns the index where a request starts in eps.
func (u *Upstream) pick(n int) int { return int(u.next.Add(1)-1) % n }

// Resolve finds the usable endpoints of a backend in a snapshot: the
// Service's TCP port by number or name, then its ready endpoints (else
// the serving and terminating ones). A missing Service or port has none.
func Resolve(snap *svcstate.Snapshot, ref route.BackendRef) []string {
	svc := snap.Service(ref.NamespacedName)
	if svc == nil {
		return nil
	}
	for _, p := range svc.Ports {
		if p.Protocol != v1.ProtocolTCP {
			continue
		}
		if (ref.PortName != "" && p.Name.Port == ref.PortName) || (ref.PortName == "" && p.Port == int(ref.Port)) {
			eps := svcstate.Usable(svc.Endpoints(p.Name))
			out := make([]string, len(eps))
			for i, e := range eps {
				out[i] = e.String()
			}
			return out
		}
	}
	return nil
}

// Pool keeps one Upstream per backend across routing tables, so that a
// new table keeps the endpoints, counters and connections of the old one.
type Pool struct {
	byRef map[route.BackendRef]*Upstream
}

// NewPool returns an empty pool.
func NewPool() *Pool { return &Pool{byRef: map[route.BackendRef]*Upstream{}} }

// For returns the upstreams of a table's backends, in its order: the
// pool's own for known backends, new ones resolved from snap otherwise.
// Backends the table no longer uses are dropped.
func (p *Pool) For(t *route.Table, snap *svcstate.Snapshot) []*Upstream {
	out := make([]*Upstream, len(t.Backends))
	next := make(map[route.BackendRef]*Upstream, len(t.Backends))
	for i, ref := range t.Backends {
		u := p.byRef[ref]
		if u == nil {
			u = newUpstream(ref)
			u.set(Resolve(snap, ref))
		}
		out[i], next[ref] = u, u
	}
	for ref, u := range p.byRef {
		if next[ref] == nil {
			u.closeTunnels(func(string) bool { return true })
		}
	}
	p.byRef = next
	return out
}

// Update re-resolves the upstreams of the services that changed.
func (p *Pool) Update(snap *svcstate.Snapshot, changed map[types.NamespacedName]struct{}) {
	for ref, u := range p.byRef {
		if _, ok := changed[ref.NamespacedName]; ok {
			u.set(Resolve(snap, ref))
		}
	}
}

func (u *Upstream) set(addrs []string) {
	set := &endpointSet{addrs: addrs, ids: make(map[string]int, len(addrs))}
	for i, a := range addrs {
		set.ids[affinityID(a)] = i
	}
	u.eps.Store(set)
	u.closeTunnels(func(addr string) bool { return !slices.Contains(addrs, addr) })
}

// track registers an upgraded connection to the pod at addr.
func (u *Upstream) track(t *upgraded, addr string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.tunnels == nil {
		u.tunnels = map[*upgraded]string{}
	}
	u.tunnels[t] = addr
	t.untrack = func() {
		u.mu.Lock()
		delete(u.tunnels, t)
		u.mu.Unlock()
	}
}

// closeTunnels closes the upgraded connections to the pods gone says.
func (u *Upstream) closeTunnels(gone func(addr string) bool) {
	u.mu.Lock()
	var closing []*upgraded
	for t, addr := range u.tunnels {
		if gone(addr) {
			closing = append(closing, t)
		}
	}
	u.mu.Unlock()
	for _, t := range closing {
		_ = t.Close()
	}
}
