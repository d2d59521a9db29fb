package server

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/dns/index"
)

// memo keeps packed responses, keyed by the question exactly as it came
// off the wire, with what each was read from (index.Deps): the node at
// every name the answer looked up. The zone's answer is a pure function
// of the snapshot and the question, and the index gives a name a new node
// whenever anything at it changes, so an entry still holds in a later
// snapshot where those nodes are the same — a change to one Service
// empties the memo of that Service's names only, not of the zone. It is
// not a cache in front of the zone in the sense the issue forbids — no
// answer outlives the data it came from — only a way to not unpack,
// resolve and pack the same question again, which is most of the CPU a
// cluster DNS spends: clients ask the same few names over and over.
//
// Only answers that depend on nothing but the question go in: zone
// answers without an upstream part, and not NXDOMAIN while autopath is
// on (autopath turns some of those into answers for some clients). The
// forward cache's answers go in too, each until its TTLs age by a second
// or it expires, whichever comes first — so a repeat is always what the
// cache would have said, except after an eviction for room, where it
// may still be repeated for that second.
type memo struct {
	shards [16]memoShard
	n      atomic.Int32
	// What lookups found (svcnet_dns_memo_lookups_total): an entry that
	// holds, none, or one that no longer does; and how often a full
	// memo started again empty.
	hits, misses, stale, resets atomic.Uint64
}

// A shard maps the 64-bit hash of a key to its entry, which holds the
// key itself: the lookup compares it in the entry, next to the answer it
// then copies. Keyed by the key as a string, the map made every hit
// touch four places of memory (the map's group, the string's bytes, the
// entry, the answer) that at 100,000 names are rarely in the CPU's
// caches: BenchmarkHandleSpread, 400 ns a hit at 100,000 Services where
// 10,000 took 230.
type memoShard struct {
	mu sync.RWMutex
	m  map[uint64]*memoEntry
}

type memoEntry struct {
	kw     []byte // the key, then the response with ID 0 and RD, CD clear
	klen   int
	qtype  uint16
	rcode  int
	source string
	until  time.Time // zero: as long as deps hold
	deps   *index.Deps
	// gen is the last snapshot deps were found to hold in: the check is
	// made once per entry and snapshot.
	gen atomic.Uint64
	// Where kw lives when key and response fit, in the entry's own
	// allocation (256 bytes in all): an A or AAAA answer for a Service
	// name does.
	inline [memoInline]byte
}

const memoInline = 152

func (e *memoEntry) key() []byte  { return e.kw[:e.klen] }
func (e *memoEntry) wire() []byte { return e.kw[e.klen:] }

// maxMemo bounds the memo, so a client asking random names costs at most
// this many entries (a few hundred bytes each); a full memo starts again
// empty. It holds every Service name of a zone of 100,000 with room to
// spare: a smaller one, asked for all of them, would start again empty
// every few seconds and answer most questions the long way.
const maxMemo = 250000

// memoSeed keys the hash; per process, so that no client can aim
// questions at one shard's bucket.
var memoSeed = maphash.MakeSeed()

func newMemo() *memo {
	m := &memo{}
	for i := range m.shards {
		m.shards[i].m = map[uint64]*memoEntry{}
	}
	return m
}

func (m *memo) shard(h uint64) *memoShard {
	return &m.shards[h>>60] // the map uses the low bits
}

// lookup returns the entry for key, whether it holds or not, without
// counting.
func (m *memo) lookup(key []byte) *memoEntry {
	h := maphash.Bytes(memoSeed, key)
	s := m.shard(h)
	s.mu.RLock()
	e := s.m[h]
	s.mu.RUnlock()
	if e == nil || !bytes.Equal(e.key(), key) {
		return nil // none, or another key of the same hash
	}
	return e
}

// get returns the entry for key if it holds in the snapshot idx at now.
func (m *memo) get(key []byte, now time.Time, idx *index.Index) (*memoEntry, bool) {
	e := m.lookup(key)
	if e == nil {
		m.misses.Add(1)
		return nil, false
	}
	if !e.until.IsZero() && !now.Before(e.until) {
		m.stale.Add(1)
		return nil, false
	}
	if gen := idx.Gen(); e.gen.Load() != gen {
		if !e.deps.Holds(idx) {
			m.stale.Add(1)
			return nil, false
		}
		e.gen.Store(gen)
	}
	m.hits.Add(1)
	return e, true
}

func (m *memo) put(key, wire []byte, qtype uint16, rcode int, source string, until time.Time, deps *index.Deps, gen uint64) {
	e := &memoEntry{klen: len(key), qtype: qtype, rcode: rcode, source: source, until: until, deps: deps}
	if n := len(key) + len(wire); n <= memoInline {
		e.kw = e.inline[:0:n]
	} else {
		e.kw = make([]byte, 0, n)
	}
	e.kw = append(append(e.kw, key...), wire...)
	e.gen.Store(gen)
	w := e.wire()
	w[0], w[1] = 0, 0
	w[2] &^= 0x01 // RD
	w[3] &^= 0x10 // CD
	h := maphash.Bytes(memoSeed, key)
	s := m.shard(h)
	s.mu.Lock()
	if _, ok := s.m[h]; ok {
		// Stale, an expired repeat of the forward cache, or (rarely)
		// another key of the same hash: the newer answer takes the place.
		s.m[h] = e
		s.mu.Unlock()
		return
	}
	if m.n.Add(1) > maxMemo {
		s.mu.Unlock()
		m.reset()
		return
	}
	s.m[h] = e
	s.mu.Unlock()
}

// reset empties the memo (entries that no longer hold stay until their
// question is asked again, so a full memo is mostly such).
func (m *memo) reset() {
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		s.m = map[uint64]*memoEntry{}
		s.mu.Unlock()
	}
	m.n.Store(0)
	m.resets.Add(1)
}

// reply writes e as the response to query into buf: the query's ID and
// its RD and CD bits, which is all that differs between two asks of the
// same question.
func (e *memoEntry) reply(query, buf []byte) []byte {
	out := append(buf[:0], e.wire()...)
	copy(out[:2], query[:2])
	out[2] |= query[2] & 0x01
	out[3] |= query[3] & 0x10
	return out
}

// memoKey checks that raw is a plain query the memo can answer — opcode
// QUERY, one question with an uncompressed name, no answer or authority
// records, nothing or one version-0 OPT record in the additional
// section, nothing after it — and writes its key into buf: the question
// as sent, then whether there is an OPT, its DO bit, and the UDP size
// the answer must fit. Anything else takes the full path, which knows
// every error to answer.
func memoKey(raw []byte, udpSize uint16, buf []byte) ([]byte, bool) {
	if len(raw) < 12+5 || raw[2]&0xf8 != 0 { // QR and opcode
		return nil, false
	}
	if binary.BigEndian.Uint16(raw[4:]) != 1 || binary.BigEndian.Uint16(raw[6:]) != 0 || binary.BigEndian.Uint16(raw[8:]) != 0 {
		return nil, false
	}
	arcount := binary.BigEndian.Uint16(raw[10:])
	if arcount > 1 {
		return nil, false
	}
	off := 12
	for {
		if off >= len(raw) {
			return nil, false
		}
		l := int(raw[off])
		if l&0xc0 != 0 {
			return nil, false
		}
		off += 1 + l
		if l == 0 {
			break
		}
		if off-12 > 255 {
			return nil, false
		}
	}
	qend := off + 4
	if qend > len(raw) {
		return nil, false
	}
	limit := uint16(dns.MinMsgSize)
	var flags byte
	switch arcount {
	case 0:
		if qend != len(raw) {
			return nil, false
		}
	case 1:
		// root name, TYPE OPT, CLASS = UDP size, TTL = ext-rcode,
		// version, flags; RDLENGTH; RDATA (options, ignored: the answer
		// carries none).
		o := raw[qend:]
		if len(o) < 11 || o[0] != 0 || binary.BigEndian.Uint16(o[1:]) != dns.TypeOPT || o[6] != 0 {
			return nil, false
		}
		if 11+int(binary.BigEndian.Uint16(o[9:])) != len(o) {
			return nil, false
		}
		limit = min(max(binary.BigEndian.Uint16(o[3:]), dns.MinMsgSize), udpSize)
		flags = 1
		if o[7]&0x80 != 0 {
			flags |= 2 // DO
		}
	}
	key := append(buf[:0], raw[12:qend]...)
	key = append(key, flags, byte(limit>>8), byte(limit))
	return key, true
}
