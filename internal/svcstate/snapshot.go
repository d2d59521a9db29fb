package svcstate

import (
	"cmp"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// shardCount splits the service map so that a new snapshot copies one
// shard (about N/256 entries) plus 256 shard pointers, instead of all N
// services. At 10,000 services that is ~40 entries per change.
const shardCount = 256

type shard map[types.NamespacedName]*Service

// Snapshot is an immutable view of all services and their endpoints.
// Snapshots share unchanged services and shards with their predecessors;
// nothing reachable from a Snapshot may be modified.
type Snapshot struct {
	shards     [shardCount]shard
	n          int
	generation uint64
}

// Generation counts the snapshots a Tracker has published that differ from
// their predecessor.
func (s *Snapshot) Generation() uint64 { return s.generation }

// Len is the number of services.
func (s *Snapshot) Len() int { return s.n }

// Service returns the service named n, or nil.
func (s *Snapshot) Service(n types.NamespacedName) *Service {
	return s.shards[shardOf(n)][n]
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
	for _, sh := range s.shards {
		for _, svc := range sh {
			if !yield(svc) {
				return
			}
		}
	}
}

// Sorted returns all services ordered by namespace and name.
func (s *Snapshot) Sorted() []*Service {
	out := make([]*Service, 0, s.n)
	for svc := range s.All {
		out = append(out, svc)
	}
	slices.SortFunc(out, func(a, b *Service) int {
		return cmp.Or(cmp.Compare(a.Name.Namespace, b.Name.Namespace), cmp.Compare(a.Name.Name, b.Name.Name))
	})
	return out
}

// snapshotBuilder makes the next snapshot from a previous one, copying a
// shard the first time it is written.
type snapshotBuilder struct {
	next   *Snapshot
	copied [shardCount]bool
}

func newBuilder(prev *Snapshot) *snapshotBuilder {
	next := *prev // copies the shard array, not the shards
	next.generation++
	return &snapshotBuilder{next: &next}
}

func (b *snapshotBuilder) set(n types.NamespacedName, svc *Service) {
	i := shardOf(n)
	if !b.copied[i] {
		old := b.next.shards[i]
		sh := make(shard, len(old)+1)
		for k, v := range old {
			sh[k] = v
		}
		b.next.shards[i] = sh
		b.copied[i] = true
	}
	_, existed := b.next.shards[i][n]
	switch {
	case svc == nil && existed:
		delete(b.next.shards[i], n)
		b.next.n--
	case svc != nil:
		b.next.shards[i][n] = svc
		if !existed {
			b.next.n++
		}
	}
}

// shardOf is FNV-1a over "namespace/name", inlined to avoid allocating.
func shardOf(n types.NamespacedName) int {
	h := uint32(2166136261)
	for i := 0; i < len(n.Namespace); i++ {
		h = (h ^ uint32(n.Namespace[i])) * 16777619
	}
	h = (h ^ '/') * 16777619
	for i := 0; i < len(n.Name); i++ {
		h = (h ^ uint32(n.Name[i])) * 16777619
	}
	return int(h % shardCount)
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
