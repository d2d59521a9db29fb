package endpointslice

import (
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// Tracker remembers the slices a controller wrote until its informer cache
// shows them, so that it never acts on a cache older than its own writes
// (which would create duplicate slices).
type Tracker struct {
	mu      sync.Mutex
	written map[string]map[string]int64 // service key -> slice -> generation (-1: deleted)
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return &Tracker{written: map[string]map[string]int64{}} }

// Record notes that slice of service key was written with generation
// (-1 when deleted).
func (t *Tracker) Record(key, slice string, generation int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.written[key] == nil {
		t.written[key] = map[string]int64{}
	}
	t.written[key][slice] = generation
}

// Stale reports whether cached lags behind what was written for key.
func (t *Tracker) Stale(key string, cached []*discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	want := t.written[key]
	if len(want) == 0 {
		return false
	}
	seen := make(map[string]int64, len(cached))
	for _, s := range cached {
		seen[s.Name] = s.Generation
	}
	for name, gen := range want {
		got, present := seen[name]
		if (gen < 0 && present) || (gen >= 0 && (!present || got < gen)) {
			return true
		}
	}
	delete(t.written, key) // caught up
	return false
}

// Forget drops what is known of key.
func (t *Tracker) Forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.written, key)
}
