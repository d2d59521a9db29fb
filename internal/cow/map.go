// Package cow is the copy-on-write map that svcnet's snapshots are made
// of: the service proxy's Services (svcstate) and the DNS zone's names,
// pods and addresses (dns/index).
package cow

import (
	"maps"
	"net/netip"
	"slices"
)

// Map is a map split into shards, held in groups, that snapshots share:
// Freeze hands out the current groups as an immutable value, and the
// next write to a shard copies that shard and its group's list of
// shards, nothing else. A change of a few keys in a map of a million
// therefore copies a few shards of a few dozen entries and a few groups
// of shard pointers, not the map, and every frozen Map stays as it was.
// One level of shards could not be both small (cheap to copy when
// written) and few (cheap to hand out at each freeze); two levels are
// both (BenchmarkUpdaterNewService, BenchmarkSnapshotOneEndpointChange;
// figures in docs/benchmarks.md).
//
// The zero Map is empty and can be read, not written; make one with New.
// A Map is not safe for concurrent writes; a frozen one may be read by
// any number of readers.
type Map[K comparable, V any] struct {
	hash   func(K) uint32
	groups [][]map[K]V
	bits   uint // log2 of the shards in a group
	n      int  // entries
	// The groups and shards copied since the last freeze, which alone
	// may be written in place: bit g, and bit g<<bits|i for shard i of
	// group g. Nil in a frozen map. Bitsets, because a freeze clears
	// them and clearing a map walks its whole capacity, which after the
	// first build (every shard owned) costs more than the change.
	ownedGroups, ownedShards bitset
}

// bitset is a set of small integers.
type bitset []uint64

func (b bitset) has(i int) bool { return b[i>>6]&(1<<(i&63)) != 0 }
func (b bitset) add(i int)      { b[i>>6] |= 1 << (i & 63) }

// New makes a map of groups×perGroup shards; both are positive powers
// of 2.
func New[K comparable, V any](groups, perGroup int, hash func(K) uint32) Map[K, V] {
	if groups <= 0 || perGroup <= 0 || groups&(groups-1) != 0 || perGroup&(perGroup-1) != 0 {
		panic("cow.New: shard counts must be positive powers of 2")
	}
	m := Map[K, V]{
		hash:        hash,
		groups:      make([][]map[K]V, groups),
		ownedGroups: make(bitset, (groups+63)/64),
		ownedShards: make(bitset, (groups*perGroup+63)/64),
	}
	for perGroup > 1 {
		m.bits++
		perGroup >>= 1
	}
	// No snapshot shares the new groups yet: they are owned already.
	for g := range m.groups {
		m.groups[g] = make([]map[K]V, 1<<m.bits)
		m.ownedGroups.add(g)
	}
	return m
}

// at is the group and the shard in it that hold k.
func (m *Map[K, V]) at(k K) (g, i int) {
	h := int(m.hash(k) & uint32(len(m.groups)<<m.bits-1))
	return h >> m.bits, h & (1<<m.bits - 1)
}

// Get returns k's value.
func (m *Map[K, V]) Get(k K) (V, bool) {
	if m.groups == nil {
		var zero V
		return zero, false
	}
	g, i := m.at(k)
	v, ok := m.groups[g][i][k]
	return v, ok
}

// Len is the number of entries.
func (m *Map[K, V]) Len() int { return m.n }

// own makes shard i of group g writable: copies of both, once per freeze.
func (m *Map[K, V]) own(g, i int) map[K]V {
	if !m.ownedGroups.has(g) {
		m.groups[g] = slices.Clone(m.groups[g])
		m.ownedGroups.add(g)
	}
	if key := g<<m.bits | i; !m.ownedShards.has(key) {
		m.groups[g][i] = maps.Clone(m.groups[g][i])
		if m.groups[g][i] == nil {
			m.groups[g][i] = map[K]V{}
		}
		m.ownedShards.add(key)
	}
	return m.groups[g][i]
}

// Set sets k's value. It panics on a frozen map.
func (m *Map[K, V]) Set(k K, v V) {
	g, i := m.at(k)
	s := m.own(g, i)
	if _, ok := s[k]; !ok {
		m.n++
	}
	s[k] = v
}

// Delete removes k. It panics on a frozen map if k is there.
func (m *Map[K, V]) Delete(k K) {
	g, i := m.at(k)
	if _, ok := m.groups[g][i][k]; ok {
		delete(m.own(g, i), k)
		m.n--
	}
}

// Freeze returns the map as it is now, never to change; m goes on
// changing without touching it.
func (m *Map[K, V]) Freeze() Map[K, V] {
	clear(m.ownedGroups)
	clear(m.ownedShards)
	return Map[K, V]{hash: m.hash, groups: slices.Clone(m.groups), bits: m.bits, n: m.n}
}

// All yields every entry, in no particular order.
func (m *Map[K, V]) All(yield func(K, V) bool) {
	for _, g := range m.groups {
		for _, s := range g {
			for k, v := range s {
				if !yield(k, v) {
					return
				}
			}
		}
	}
}

// FNV-1a: cheap, and good enough to spread keys over shards.
const (
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

// String hashes s.
func String(s string) uint32 { return more(fnvOffset, s) }

// Path hashes "a/b" without building it (a namespace and a name).
func Path(a, b string) uint32 { return more((more(fnvOffset, a)^'/')*fnvPrime, b) }

// more continues hash h over s.
func more(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * fnvPrime
	}
	return h
}

// Addr hashes a.
func Addr(a netip.Addr) uint32 {
	h := uint32(fnvOffset)
	for _, b := range a.As16() {
		h = (h ^ uint32(b)) * fnvPrime
	}
	return h
}

// Mix combines two hashes.
func Mix(a, b uint32) uint32 { return a ^ b*fnvPrime }
