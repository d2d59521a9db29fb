package forward

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// cacheKey is what makes two questions the same question upstream. The DO
// bit is part of it because it changes what the upstream returns.
type cacheKey struct {
	name  string // canonical
	qtype uint16
	class uint16
	do    bool
}

type entry struct {
	msg     *dns.Msg // never changed once stored
	stored  time.Time
	expires time.Time
}

// cache is a bounded map of upstream answers, split in shards so that
// concurrent readers on different names do not contend on one lock.
// Eviction is arbitrary (Go's map order) rather than LRU: it is O(1), and
// for a DNS cache in front of names that are all short-lived anyway the
// difference in hit rate is small.
type cache struct {
	seed     maphash.Seed
	shards   [32]shard
	perShard int
}

type shard struct {
	mu sync.RWMutex
	m  map[cacheKey]entry
}

func newCache(size int) *cache {
	c := &cache{seed: maphash.MakeSeed(), perShard: max(1, size/32)}
	for i := range c.shards {
		c.shards[i].m = map[cacheKey]entry{}
	}
	return c
}

func (c *cache) shard(k cacheKey) *shard {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(k.name)
	return &c.shards[(h.Sum64()^uint64(k.qtype))%uint64(len(c.shards))]
}

// get returns a copy of the answer for k with TTLs aged by the time it
// spent in the cache, so downstream caches never keep it past its life,
// and until when that copy stays the same: the next whole second of age,
// or the expiry.
func (c *cache) get(k cacheKey, now time.Time) (*dns.Msg, time.Time, bool) {
	s := c.shard(k)
	s.mu.RLock()
	e, ok := s.m[k]
	s.mu.RUnlock()
	if !ok {
		return nil, time.Time{}, false
	}
	if !now.Before(e.expires) {
		s.mu.Lock()
		if cur, ok := s.m[k]; ok && cur.stored.Equal(e.stored) {
			delete(s.m, k)
		}
		s.mu.Unlock()
		return nil, time.Time{}, false
	}
	age := uint32(now.Sub(e.stored) / time.Second)
	until := e.stored.Add(time.Duration(age+1) * time.Second)
	if e.expires.Before(until) {
		until = e.expires
	}
	m := e.msg.Copy()
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			h := rr.Header()
			h.Ttl = max(h.Ttl, age) - age
		}
	}
	return m, until, true
}

func (c *cache) put(k cacheKey, m *dns.Msg, ttl time.Duration, now time.Time) {
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[k]; !ok && len(s.m) >= c.perShard {
		for old := range s.m {
			delete(s.m, old)
			break
		}
	}
	s.m[k] = entry{msg: m, stored: now, expires: now.Add(ttl)}
}

func (c *cache) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}

// cacheTTL is how long m may be served from the cache: the smallest TTL
// of its records for answers, the SOA's negative TTL for NXDOMAIN and
// NODATA (RFC 2308), nothing for failures or answers without an SOA to
// say how long a denial holds.
func cacheTTL(m *dns.Msg, maxTTL, maxNeg time.Duration) (time.Duration, bool) {
	if m.Truncated {
		return 0, false
	}
	switch {
	case m.Rcode == dns.RcodeSuccess && len(m.Answer) > 0:
		least := uint32(1<<32 - 1)
		for _, sec := range [][]dns.RR{m.Answer, m.Ns} {
			for _, rr := range sec {
				least = min(least, rr.Header().Ttl)
			}
		}
		d := min(time.Duration(least)*time.Second, maxTTL)
		return d, d > 0
	case m.Rcode == dns.RcodeSuccess || m.Rcode == dns.RcodeNameError:
		for _, rr := range m.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				d := min(time.Duration(min(soa.Hdr.Ttl, soa.Minttl))*time.Second, maxNeg)
				return d, d > 0
			}
		}
	}
	return 0, false
}
