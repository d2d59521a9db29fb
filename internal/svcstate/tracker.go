package svcstate

import (
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/cow"
)

// Config configures a Tracker.
type Config struct {
	// NodeName is the node the consumer runs on; endpoints on it are
	// IsLocal. Empty for consumers without a node (DNS, ingress).
	NodeName string
	// Logger receives one line per dropped piece of input. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// OnBadInput, if set, is called for every dropped piece of input, e.g.
	// to count it in a metric. It runs with the tracker locked: it must be
	// quick and must not call back into the tracker.
	OnBadInput func(BadInput)
	// OnChange, if set, is called after every event that may change the
	// next snapshot, outside the tracker's lock; typically a sync runner's
	// Run. It must not block.
	OnChange func()
	// OnVersion, if set, is called instead of OnChange after an event
	// that brings only a newer EndpointSlice version and no change (a
	// slice of another family): a consumer that publishes what it has
	// programmed (Changes.SliceVersion) may want a sync, but one that
	// must not count as a change's and hold the next change back, as a
	// Run would. Nil: OnChange. It must not block.
	OnVersion func()
	// Now defaults to time.Now; tests replace it.
	Now func() time.Time
	// Family, if set, makes the tracker use only that family's objects:
	// Services with a cluster IP of the family (the others are skipped
	// whole, as kube-proxy's per-family change tracker skips them) and
	// EndpointSlices of its address type. One tracker per family is a
	// dual-stack proxy's.
	Family v1.IPFamily
}

// Tracker turns Service and EndpointSlice events into snapshots. Its On*
// methods have the signatures of client-go event handlers and are safe for
// concurrent use.
type Tracker struct {
	cfg Config

	mu       sync.Mutex
	services map[types.NamespacedName]*Service // parsed, without endpoints
	// live is the next snapshot's services: the last one's, with the
	// changes applied since, sharing all it has not changed.
	live   cow.Map[types.NamespacedName, *Service]
	slices map[types.NamespacedName]map[string]*sliceInfo // by service, then slice name
	dirty  map[types.NamespacedName]time.Time             // earliest trigger time per service
	snap   *Snapshot
	bad    map[Reason]uint64
	// sliceVersion is the newest EndpointSlice resourceVersion among the
	// events handled so far (see Changes.SliceVersion).
	sliceVersion uint64
}

// NewTracker returns a Tracker with an empty snapshot.
func NewTracker(cfg Config) *Tracker {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Tracker{
		cfg:      cfg,
		services: map[types.NamespacedName]*Service{},
		slices:   map[types.NamespacedName]map[string]*sliceInfo{},
		dirty:    map[types.NamespacedName]time.Time{},
		live:     newServiceMap(),
		snap:     &Snapshot{},
		bad:      map[Reason]uint64{},
	}
}

// OnServiceAdd records a new Service.
func (t *Tracker) OnServiceAdd(svc *v1.Service) { t.OnServiceUpdate(nil, svc) }

// OnServiceUpdate records a changed Service. An update that does not
// change the resource version (an informer resync) is ignored.
func (t *Tracker) OnServiceUpdate(old, svc *v1.Service) {
	if svc == nil {
		return
	}
	if old != nil && old.ResourceVersion != "" && old.ResourceVersion == svc.ResourceVersion {
		return
	}
	nn := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	now := t.cfg.Now()
	t.mu.Lock()
	parsed := parseService(svc, t.report)
	t.services[nn] = parsed
	t.markDirty(nn, now)
	t.mu.Unlock()
	t.changed()
}

// OnServiceDelete records a deleted Service.
func (t *Tracker) OnServiceDelete(svc *v1.Service) {
	if svc == nil {
		return
	}
	nn := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	now := t.cfg.Now()
	t.mu.Lock()
	delete(t.services, nn)
	t.markDirty(nn, now)
	t.mu.Unlock()
	t.changed()
}

// OnEndpointSliceAdd records a new EndpointSlice.
func (t *Tracker) OnEndpointSliceAdd(s *discovery.EndpointSlice) { t.OnEndpointSliceUpdate(nil, s) }

// OnEndpointSliceUpdate records a changed EndpointSlice. An update that
// does not change the resource version is ignored.
func (t *Tracker) OnEndpointSliceUpdate(old, s *discovery.EndpointSlice) {
	if s == nil {
		return
	}
	if old != nil && old.ResourceVersion != "" && old.ResourceVersion == s.ResourceVersion {
		return
	}
	trigger := triggerTime(s)
	if trigger.IsZero() {
		trigger = t.cfg.Now()
	}
	t.mu.Lock()
	// The version is noted under the same lock as the change it brings,
	// so that no snapshot claims it without the change.
	t.noteSliceVersion(s)
	if t.cfg.Family != "" && !sliceOfFamily(s, t.cfg.Family) {
		// Another family's: seen (its version counts), not used; one
		// that left the family leaves it.
		left := false
		if old != nil && sliceOfFamily(old, t.cfg.Family) {
			if svc, ok := sliceService(old); ok {
				t.removeSlice(svc, old.Name, trigger)
				left = true
			}
		}
		t.mu.Unlock()
		if left {
			t.changed()
		} else {
			t.versionOnly()
		}
		return
	}
	// A slice relabelled to another service (not something the controller
	// does, but the API allows it) must leave its old service.
	if old != nil {
		if prev, ok := sliceService(old); ok {
			if cur, _ := sliceService(s); cur != prev {
				t.removeSlice(prev, old.Name, trigger)
			}
		}
	}
	info := parseSlice(s, t.cfg.NodeName, t.report)
	if info == nil {
		// Nothing usable: forget whatever an earlier version contributed.
		if svc, ok := sliceService(s); ok {
			t.removeSlice(svc, s.Name, trigger)
		}
	} else {
		m := t.slices[info.service]
		if m == nil {
			m = map[string]*sliceInfo{}
			t.slices[info.service] = m
		}
		m[info.name] = info
		t.markDirty(info.service, trigger)
	}
	t.mu.Unlock()
	t.changed()
}

// OnEndpointSliceDelete records a deleted EndpointSlice.
func (t *Tracker) OnEndpointSliceDelete(s *discovery.EndpointSlice) {
	if s == nil {
		return
	}
	svc, ok := sliceService(s)
	if !ok {
		return
	}
	now := t.cfg.Now()
	t.mu.Lock()
	t.noteSliceVersion(s)
	mine := t.cfg.Family == "" || sliceOfFamily(s, t.cfg.Family)
	if mine {
		t.removeSlice(svc, s.Name, now)
	}
	t.mu.Unlock()
	if mine {
		t.changed()
	} else {
		t.versionOnly()
	}
}

// noteSliceVersion records s's resourceVersion if it is the newest seen.
// A deleted slice's is the deletion's, as the API server reports it.
// Versions that are not numbers (an API server not backed by etcd) are
// not counted: the watermark then stays 0 and no one relies on it.
func (t *Tracker) noteSliceVersion(s *discovery.EndpointSlice) {
	if v, ok := ParseResourceVersion(s.ResourceVersion); ok && v > t.sliceVersion {
		t.sliceVersion = v
	}
}

// ParseResourceVersion reads a resourceVersion as the etcd revision it
// is on kube-apiserver and svcnet's API server: the only comparison of
// versions svcnet makes, that of a watermark of what a consumer has
// programmed with the version a reader saw (see Changes.SliceVersion).
func ParseResourceVersion(rv string) (uint64, bool) {
	v, err := strconv.ParseUint(rv, 10, 64)
	return v, err == nil && v > 0
}

func (t *Tracker) removeSlice(svc types.NamespacedName, name string, trigger time.Time) {
	m := t.slices[svc]
	if _, ok := m[name]; !ok {
		return
	}
	delete(m, name)
	if len(m) == 0 {
		delete(t.slices, svc)
	}
	t.markDirty(svc, trigger)
}

func (t *Tracker) markDirty(nn types.NamespacedName, trigger time.Time) {
	if old, ok := t.dirty[nn]; !ok || trigger.Before(old) {
		t.dirty[nn] = trigger
	}
}

func (t *Tracker) changed() {
	if t.cfg.OnChange != nil {
		t.cfg.OnChange()
	}
}

func (t *Tracker) versionOnly() {
	if t.cfg.OnVersion != nil {
		t.cfg.OnVersion()
		return
	}
	t.changed()
}

func (t *Tracker) report(b BadInput) {
	t.bad[b.Reason]++
	t.cfg.Logger.Warn("dropping unusable input", "kind", b.Kind, "object", b.Object.String(),
		"field", b.Field, "value", b.Value, "reason", string(b.Reason))
	if t.cfg.OnBadInput != nil {
		t.cfg.OnBadInput(b)
	}
}

// BadInputCounts returns how many pieces of input were dropped, by reason,
// since the tracker was made.
func (t *Tracker) BadInputCounts() map[Reason]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.bad)
}

// Pending reports whether events arrived since the last Snapshot. They may
// still turn out to change nothing.
func (t *Tracker) Pending() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.dirty) > 0
}

// Current returns the last snapshot without consuming pending events.
func (t *Tracker) Current() *Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.snap
}

// Snapshot applies the events received since the previous call and
// returns the resulting snapshot with what changed. Work is proportional to
// the services touched by those events, not to the number of services.
func (t *Tracker) Snapshot() (*Snapshot, Changes) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.dirty) == 0 {
		return t.snap, Changes{SliceVersion: t.sliceVersion}
	}
	ch := Changes{
		SliceVersion: t.sliceVersion,
		Ports:        map[ServicePortName]struct{}{},
		Services:     map[types.NamespacedName]struct{}{},
		TriggerTimes: map[types.NamespacedName]time.Time{},
	}
	for nn, trigger := range t.dirty {
		old := t.snap.Service(nn)
		cur := t.build(nn)
		ports := map[ServicePortName]struct{}{}
		diffService(old, cur, ports)
		metaChanged := (old == nil) != (cur == nil) || (old != nil && cur != nil && !serviceMetaEqual(old, cur))
		if len(ports) == 0 && !metaChanged {
			continue // e.g. a slice rewritten with the same content
		}
		if cur == nil {
			t.live.Delete(nn)
		} else {
			t.live.Set(nn, cur)
		}
		maps.Copy(ch.Ports, ports)
		ch.Services[nn] = struct{}{}
		ch.TriggerTimes[nn] = trigger
	}
	clear(t.dirty)
	if len(ch.Services) == 0 {
		return t.snap, Changes{SliceVersion: t.sliceVersion}
	}
	t.snap = &Snapshot{services: t.live.Freeze(), generation: t.snap.generation + 1}
	return t.snap, ch
}

// build makes the immutable Service for nn from the tracker's current
// state, or nil if the Service does not exist.
func (t *Tracker) build(nn types.NamespacedName) *Service {
	parsed := t.services[nn]
	if parsed == nil {
		return nil
	}
	svc := *parsed
	m := t.slices[nn]
	if len(m) > 0 {
		ordered := slices.SortedFunc(maps.Values(m), func(a, b *sliceInfo) int { return strings.Compare(a.name, b.name) })
		svc.endpoints = mergeEndpoints(nn, ordered)
	}
	return &svc
}
