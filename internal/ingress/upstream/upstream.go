// Package upstream is what every engine of the ingress asks about pods:
// the endpoint set of each backend and where a request starts in it, the
// connections kept to pods, and the next-upstream rules — which failure
// sends a request again, to the same pod or the next one, and which is
// answered 502 or 504. The epoll engine and the net/http path both follow
// these rules, so a request fails the same way whichever served it.
package upstream

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
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
	eps  atomic.Pointer[Set] // never nil
	next atomic.Uint32       // round robin

	// tunnels are the upgraded connections (WebSocket …) to its pods, by
	// pod: they are closed when their pod leaves the endpoints or the
	// backend leaves the routing table, and never on other changes.
	mu      sync.Mutex
	tunnels map[io.Closer]string
}

// Set is one version of an upstream's endpoints.
type Set struct {
	Addrs []string       // "ip:port"
	ids   map[string]int // affinity cookie value -> index in Addrs
}

// ByAffinity is the index of the endpoint an affinity cookie's value
// names, if it is still in the set.
func (s *Set) ByAffinity(id string) (int, bool) {
	i, ok := s.ids[id]
	return i, ok
}

// New returns an upstream of ref without endpoints.
func New(ref route.BackendRef) *Upstream {
	u := &Upstream{Ref: ref}
	u.eps.Store(&Set{})
	return u
}

// Load returns the current endpoint set.
func (u *Upstream) Load() *Set { return u.eps.Load() }

// Endpoints returns the current addresses ("ip:port").
func (u *Upstream) Endpoints() []string { return u.eps.Load().Addrs }

// AffinityID is what an affinity cookie holds for an endpoint: a digest
// of its address, the same in every replica of the ingress (as
// ingress-nginx's), which does not show the pod's address.
func AffinityID(addr string) string {
	sum := sha256.Sum256([]byte(addr))
	return hex.EncodeToString(sum[:8])
}

// Pick returns the index where a request starts among n endpoints: round
// robin over the upstream's requests.
func (u *Upstream) Pick(n int) int { return int(u.next.Add(1)-1) % n }

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

// For returns the upstreams of backends, in their order: the pool's own
// for known backends, new ones resolved from snap otherwise. Backends no
// longer given are dropped.
func (p *Pool) For(backends []route.BackendRef, snap *svcstate.Snapshot) []*Upstream {
	out := make([]*Upstream, len(backends))
	next := make(map[route.BackendRef]*Upstream, len(backends))
	for i, ref := range backends {
		u := p.byRef[ref]
		if u == nil {
			u = New(ref)
			u.Set(Resolve(snap, ref))
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
			u.Set(Resolve(snap, ref))
		}
	}
}

// Set swaps in the endpoints addrs, and closes the tunnels to pods no
// longer among them.
func (u *Upstream) Set(addrs []string) {
	set := &Set{Addrs: addrs, ids: make(map[string]int, len(addrs))}
	for i, a := range addrs {
		set.ids[AffinityID(a)] = i
	}
	u.eps.Store(set)
	u.closeTunnels(func(addr string) bool { return !slices.Contains(addrs, addr) })
}

// Track registers an upgraded connection to the pod at addr, closed when
// the pod leaves the endpoints; the function returned forgets it.
func (u *Upstream) Track(t io.Closer, addr string) (untrack func()) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.tunnels == nil {
		u.tunnels = map[io.Closer]string{}
	}
	u.tunnels[t] = addr
	return func() {
		u.mu.Lock()
		delete(u.tunnels, t)
		u.mu.Unlock()
	}
}

// closeTunnels closes the upgraded connections to the pods gone says.
func (u *Upstream) closeTunnels(gone func(addr string) bool) {
	u.mu.Lock()
	var closing []io.Closer
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
