package userspace

import (
	"net/netip"
	"slices"
	"sync"
	"time"
)

// balancer hands out the endpoints of one proxy socket round-robin,
// keeping a client on its endpoint while session affinity holds.
type balancer struct {
	mu        sync.Mutex
	endpoints []string // "ip:port"
	next      int
	affinity  time.Duration // 0: none
	sticky    map[netip.Addr]*stickyEntry
	now       func() time.Time
}

type stickyEntry struct {
	endpoint string
	last     time.Time
}

// stickyPrune bounds the affinity table's growth between updates by
// pruning expired entries once it is this large.
const stickyPrune = 4096

func newBalancer(now func() time.Time) *balancer {
	return &balancer{sticky: map[netip.Addr]*stickyEntry{}, now: now}
}

// update replaces the endpoints. The round-robin position and affinities
// to endpoints that remain are kept, so that a change to one endpoint
// does not reshuffle every client.
func (b *balancer) update(endpoints []string, affinity time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.endpoints = endpoints
	if len(endpoints) > 0 {
		b.next %= len(endpoints)
	} else {
		b.next = 0
	}
	b.affinity = affinity
	for c, s := range b.sticky {
		if affinity == 0 || !slices.Contains(endpoints, s.endpoint) {
			delete(b.sticky, c)
		}
	}
}

// count returns the number of endpoints.
func (b *balancer) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.endpoints)
}

// pick returns the endpoint for a new connection from client, skipping
// those in tried (endpoints that just failed for it). ok is false when
// there is none left.
func (b *balancer) pick(client netip.Addr, tried map[string]bool) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if b.affinity > 0 {
		if s, ok := b.sticky[client]; ok {
			if now.Sub(s.last) <= b.affinity && !tried[s.endpoint] {
				s.last = now
				return s.endpoint, true
			}
			delete(b.sticky, client)
		}
	}
	for i := range b.endpoints {
		j := (b.next + i) % len(b.endpoints)
		ep := b.endpoints[j]
		if tried[ep] {
			continue
		}
		b.next = (j + 1) % len(b.endpoints)
		if b.affinity > 0 {
			if len(b.sticky) >= stickyPrune {
				b.prune(now)
			}
			b.sticky[client] = &stickyEntry{endpoint: ep, last: now}
		}
		return ep, true
	}
	return "", false
}

func (b *balancer) prune(now time.Time) {
	for c, s := range b.sticky {
		if now.Sub(s.last) > b.affinity {
			delete(b.sticky, c)
		}
	}
}
