package healthcheck

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// Desired follows the snapshots the rules are built from and says which
// health-check node ports to serve with which counts. It looks only at
// the services that changed, so it costs nothing per sync at 10,000
// services.
type Desired struct {
	family   v1.IPFamily
	services map[types.NamespacedName]Service
}

// NewDesired returns an empty Desired for one IP family.
func NewDesired(family v1.IPFamily) *Desired {
	return &Desired{family: family, services: map[types.NamespacedName]Service{}}
}

// Update applies a sync's changes and reports whether anything differs.
func (d *Desired) Update(res proxy.SyncResult) bool {
	seen := map[types.NamespacedName]bool{}
	changed := false
	for n := range res.Changed {
		nn := n.NamespacedName
		if seen[nn] {
			continue
		}
		seen[nn] = true
		want, ok := d.serviceOf(res.Current, nn)
		old, had := d.services[nn]
		switch {
		case !ok && had:
			delete(d.services, nn)
			changed = true
		case ok && (!had || old != want):
			d.services[nn] = want
			changed = true
		}
	}
	return changed
}

// Services returns what to serve; callers must not modify it.
func (d *Desired) Services() map[types.NamespacedName]Service { return d.services }

// serviceOf counts, like kube-proxy, the distinct addresses of ready
// endpoints on this node over the service's ports. Serving-terminating
// endpoints still get traffic the rules already send here, but the
// load balancer should stop sending new traffic: they do not count.
func (d *Desired) serviceOf(s *svcstate.Snapshot, nn types.NamespacedName) (Service, bool) {
	if s == nil {
		return Service{}, false
	}
	svc := s.Service(nn)
	if svc == nil {
		return Service{}, false
	}
	port := 0
	local := map[netip.Addr]bool{}
	for _, p := range svc.Ports {
		if p.HealthCheckNodePort == 0 || !p.ClusterIP(d.family).IsValid() {
			continue
		}
		port = p.HealthCheckNodePort
		for _, e := range svc.Endpoints(p.Name) {
			if e.IsLocal && e.Ready && svcstate.Family(e.IP) == d.family {
				local[e.IP] = true
			}
		}
	}
	if port == 0 {
		return Service{}, false
	}
	return Service{Port: port, LocalEndpoints: len(local)}, true
}
