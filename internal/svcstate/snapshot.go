package svcstate

import (
	"cmp"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/cow"
)

// The services are a copy-on-write map of 64 groups of 64 shards: a new
// snapshot copies the shards its changes touch and their groups' shard
// lists, a few dozen entries and pointers at 100,000 Services, never the
// whole map.
const (
	serviceGroups = 64
	serviceShards = 64
)

func newServiceMap() cow.Map[types.NamespacedName, *Service] {
	return cow.New[types.NamespacedName, *Service](serviceGroups, serviceShards, hashName)
}

func hashName(n types.NamespacedName) uint32 { return cow.Path(n.Namespace, n.Name) }

// Snapshot is an immutable view of all services and their endpoints.
// Snapshots share unchanged services and shards with their predecessors;
// nothing reachable from a Snapshot may be modified.
type Snapshot struct {
	services   cow.Map[types.NamespacedName, *Service]
	generation uint64
}

// Generation counts the snapshots a Tracker has published that differ from
// their predecessor.
func (s *Snapshot) Generation() uint64 { return s.generation }

// Len is the number of services.
func (s *Snapshot) Len() int { return s.services.Len() }

// Service returns the service named n, or nil.
func (s *Snapshot) Service(n types.NamespacedName) *Service {
	svc, _ := s.services.Get(n)
	return svc
}

// Port returns service port n and its endpoints; nil when the service or
// the port does not exist.
func (s *Snapshot) Port(n ServicePortName) (*ServicePort, []Endpoint) {
	svc := s.Service(n.NamespacedName)
	if svc == nil {
		return nil, nil
	}
	p := svc.Port(n)
	if p == nil {
		return nil, nil
	}
	return p, svc.Endpoints(n)
}

// All calls yield for every service, in no particular order, until yield
// returns false. It is usable as a range-over-func iterator.
func (s *Snapshot) All(yield func(*Service) bool) {
	for _, svc := range s.services.All {
		if !yield(svc) {
			return
		}
	}
}

// Sorted returns all services ordered by namespace and name.
func (s *Snapshot) Sorted() []*Service {
	out := make([]*Service, 0, s.Len())
	for svc := range s.All {
		out = append(out, svc)
	}
	slices.SortFunc(out, func(a, b *Service) int {
		return cmp.Or(cmp.Compare(a.Name.Namespace, b.Name.Namespace), cmp.Compare(a.Name.Name, b.Name.Name))
	})
	return out
}

// Changes says what differs between a snapshot and the one its consumer
// took before.
type Changes struct {
	// Ports holds every service port whose definition or endpoints changed,
	// including ports that were removed.
	Ports map[ServicePortName]struct{}
	// Services holds the services those ports belong to.
	Services map[types.NamespacedName]struct{}
	// TriggerTimes holds, per changed service, the earliest time at which
	// one of the changes was made in the API: the EndpointSlice's
	// endpoints.kubernetes.io/last-change-trigger-time annotation, or when
	// the tracker received the event. It feeds the network programming
	// latency metric.
	TriggerTimes map[types.NamespacedName]time.Time
	// SliceVersion is the newest EndpointSlice resourceVersion among the
	// events the snapshot includes (0 before any, or from an API server
	// whose versions are not numbers). Events arrive in version order on
	// one watch, so a consumer whose state matches the snapshot reflects
	// every slice change up to this version: its watermark of what it
	// has programmed. A snapshot that changed nothing still carries it.
	SliceVersion uint64
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool { return len(c.Ports) == 0 && len(c.Services) == 0 }

// Earliest returns the earliest trigger time, or the zero time.
func (c Changes) Earliest() time.Time {
	var t time.Time
	for _, tt := range c.TriggerTimes {
		if t.IsZero() || tt.Before(t) {
			t = tt
		}
	}
	return t
}

// Merge adds o to c, keeping the earlier trigger time per service. A
// consumer whose sync failed merges the next changes into the ones it
// could not apply.
func (c *Changes) Merge(o Changes) {
	if c.Ports == nil {
		c.Ports = map[ServicePortName]struct{}{}
	}
	if c.Services == nil {
		c.Services = map[types.NamespacedName]struct{}{}
	}
	if c.TriggerTimes == nil {
		c.TriggerTimes = map[types.NamespacedName]time.Time{}
	}
	for p := range o.Ports {
		c.Ports[p] = struct{}{}
	}
	for s := range o.Services {
		c.Services[s] = struct{}{}
	}
	for s, t := range o.TriggerTimes {
		if old, ok := c.TriggerTimes[s]; !ok || t.Before(old) {
			c.TriggerTimes[s] = t
		}
	}
	c.SliceVersion = max(c.SliceVersion, o.SliceVersion)
}

// diffService returns the ports whose definition or endpoints differ
// between two versions of a service; either may be nil.
func diffService(old, cur *Service, changed map[ServicePortName]struct{}) {
	oldPorts := map[ServicePortName]*ServicePort{}
	if old != nil {
		for _, p := range old.Ports {
			oldPorts[p.Name] = p
		}
	}
	if cur != nil {
		for _, p := range cur.Ports {
			if o, ok := oldPorts[p.Name]; !ok || !o.equal(p) {
				changed[p.Name] = struct{}{}
			}
			delete(oldPorts, p.Name)
		}
	}
	for n := range oldPorts {
		changed[n] = struct{}{}
	}
	var oldEps, curEps map[ServicePortName][]Endpoint
	if old != nil {
		oldEps = old.endpoints
	}
	if cur != nil {
		curEps = cur.endpoints
	}
	for n, eps := range curEps {
		if !endpointsEqual(oldEps[n], eps) {
			changed[n] = struct{}{}
		}
	}
	for n := range oldEps {
		if _, ok := curEps[n]; !ok {
			changed[n] = struct{}{}
		}
	}
}

// serviceMetaEqual compares what a Service carries beyond its ports.
func serviceMetaEqual(a, b *Service) bool {
	return a.Type == b.Type && slices.Equal(a.ClusterIPs, b.ClusterIPs) && a.Headless == b.Headless &&
		a.ExternalName == b.ExternalName
}
