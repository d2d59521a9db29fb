package index

import (
	"maps"
	"net/netip"
	"slices"
)

// cowMap is a map split into shards, held in groups, that snapshots
// share: freeze hands out the current groups as an immutable value, and
// the next write to a shard copies that shard and its group's list of
// shards, nothing else. A change of a few names in a zone of a million
// therefore copies a few shards of a few dozen entries and a few groups
// of shard pointers, not the zone, and every published Index stays as it
// was. One level of shards could not be both small (cheap to copy when
// written) and few (cheap to hand out at each freeze); two levels are
// both (BenchmarkUpdaterNewService; figures in docs/benchmarks.md).
type cowMap[K comparable, V any] struct {
	hash   func(K) uint32
	groups [][]map[K]V
	bits   uint // log2 of the shards in a group
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

// newCOWMap makes a map of groups×perGroup shards; both are positive
// powers of 2.
func newCOWMap[K comparable, V any](groups, perGroup int, hash func(K) uint32) cowMap[K, V] {
	if groups <= 0 || perGroup <= 0 || groups&(groups-1) != 0 || perGroup&(perGroup-1) != 0 {
		panic("cowMap: shard counts must be positive powers of 2")
	}
	m := cowMap[K, V]{
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
func (m *cowMap[K, V]) at(k K) (g, i int) {
	h := int(m.hash(k) & uint32(len(m.groups)<<m.bits-1))
	return h >> m.bits, h & (1<<m.bits - 1)
}

func (m *cowMap[K, V]) get(k K) (V, bool) {
	g, i := m.at(k)
	v, ok := m.groups[g][i][k]
	return v, ok
}

// own makes shard i of group g writable: copies of both, once per freeze.
func (m *cowMap[K, V]) own(g, i int) map[K]V {
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

func (m *cowMap[K, V]) set(k K, v V) {
	g, i := m.at(k)
	m.own(g, i)[k] = v
}

func (m *cowMap[K, V]) del(k K) {
	g, i := m.at(k)
	if _, ok := m.groups[g][i][k]; ok {
		delete(m.own(g, i), k)
	}
}

// freeze returns the map as it is now, never to change; m goes on
// changing without touching it.
func (m *cowMap[K, V]) freeze() cowMap[K, V] {
	clear(m.ownedGroups)
	clear(m.ownedShards)
	return cowMap[K, V]{hash: m.hash, groups: slices.Clone(m.groups), bits: m.bits}
}

// all yields every entry, in no particular order.
func (m *cowMap[K, V]) all(yield func(K, V) bool) {
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
