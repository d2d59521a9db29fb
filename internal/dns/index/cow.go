package index

import (
	"maps"
	"net/netip"
)

// cowMap is a map split into shards that snapshots share: freeze hands
// out the current shards as an immutable value, and the next write to a
// shard copies that shard alone. A change of a few names in a zone of a
// million therefore copies a few shards of a few hundred entries, not the
// zone, and every published Index stays as it was.
type cowMap[K comparable, V any] struct {
	hash   func(K) uint32
	shards []map[K]V
	// owned marks the shards copied since the last freeze: only those may
	// be written in place. Nil in a frozen map.
	owned []bool
}

func newCOWMap[K comparable, V any](shards int, hash func(K) uint32) cowMap[K, V] {
	return cowMap[K, V]{hash: hash, shards: make([]map[K]V, shards), owned: make([]bool, shards)}
}

func (m *cowMap[K, V]) shard(k K) int { return int(m.hash(k) & uint32(len(m.shards)-1)) }

func (m *cowMap[K, V]) get(k K) (V, bool) {
	v, ok := m.shards[m.shard(k)][k]
	return v, ok
}

func (m *cowMap[K, V]) own(i int) map[K]V {
	if !m.owned[i] {
		m.shards[i] = maps.Clone(m.shards[i])
		if m.shards[i] == nil {
			m.shards[i] = map[K]V{}
		}
		m.owned[i] = true
	}
	return m.shards[i]
}

func (m *cowMap[K, V]) set(k K, v V) { m.own(m.shard(k))[k] = v }

func (m *cowMap[K, V]) del(k K) {
	i := m.shard(k)
	if _, ok := m.shards[i][k]; ok {
		delete(m.own(i), k)
	}
}

// freeze returns the map as it is now, never to change; m goes on
// changing without touching it.
func (m *cowMap[K, V]) freeze() cowMap[K, V] {
	clear(m.owned)
	out := cowMap[K, V]{hash: m.hash, shards: make([]map[K]V, len(m.shards))}
	copy(out.shards, m.shards)
	return out
}

// FNV-1a: cheap, and good enough to spread names over shards.
const (
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

func hashString(s string) uint32 {
	h := uint32(fnvOffset)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * fnvPrime
	}
	return h
}

func hashAddr(a netip.Addr) uint32 {
	h := uint32(fnvOffset)
	for _, b := range a.As16() {
		h = (h ^ uint32(b)) * fnvPrime
	}
	return h
}

// nsAddr is a pod address in a namespace (verified pod records).
type nsAddr struct {
	ns string
	ip netip.Addr
}

func hashNSAddr(k nsAddr) uint32 { return hashString(k.ns) ^ hashAddr(k.ip)*fnvPrime }
