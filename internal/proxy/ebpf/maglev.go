package ebpf

import (
	"hash/fnv"
	"net/netip"
)

// MaglevSize is the length of a Maglev lookup table: a prime, about a
// hundred entries per backend for sets of ten.
const MaglevSize = 1021

// maglevTable fills a Maglev lookup table (Eisenbud et al., NSDI 2016)
// for backends: entry i holds the slot of the backend a flow hashing to
// i goes to. Each backend's permutation comes from its address alone, so
// that every node builds the same table, and a backend leaving moves
// little more than its own share of flows.
func maglevTable(backends []netip.AddrPort) []uint16 {
	n := len(backends)
	table := make([]uint16, MaglevSize)
	if n == 0 {
		return table
	}
	offset, skip := make([]uint64, n), make([]uint64, n)
	for i, b := range backends {
		h := fnv.New64a()
		h.Write([]byte(b.String()))
		offset[i] = h.Sum64() % MaglevSize
		h.Write([]byte("skip"))
		skip[i] = h.Sum64()%(MaglevSize-1) + 1
	}
	filled := make([]bool, MaglevSize)
	next := make([]uint64, n)
	for done := 0; ; {
		for i := range n {
			c := (offset[i] + next[i]*skip[i]) % MaglevSize
			for filled[c] {
				next[i]++
				c = (offset[i] + next[i]*skip[i]) % MaglevSize
			}
			table[c], filled[c] = uint16(i), true
			next[i]++
			if done++; done == MaglevSize {
				return table
			}
		}
	}
}
