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
	shards [1 << memoShardBits]memoShard
	n      atomic.Int32
	max    int32 // maxMemo; smaller in tests
	// resetMu lets one put empty a full memo while the others that found
	// it full wait, then find it no longer full.
	resetMu sync.Mutex
	resets  atomic.Uint64 // svcnet_dns_memo_resets_total
}

// A shard maps the 64-bit hash of a key to its entry, which holds the
// key itself: the lookup compares it in the entry, next to the answer it
// then copies. The map is a table of its own, open addressing over
// (hash, entry) slots at most half full, that lookups read without a
// lock: each slot's words are atomic, a writer (under mu) fills an empty
// slot entry first, then hash, or swaps the entry of a slot with the same
// hash, and grows the table into a new one that it then publishes; a
// lookup that races with either finds the old entry, or none and takes
// the long way, never a wrong one (the key is compared in the entry).
//
// Why no lock: in a large zone few slots and entries are in the CPU's
// caches, and the UDP loop reads the slots of every query of a recvmmsg
// batch, then their entries, before it answers any, so that their misses
// overlap — which a read lock per lookup prevents, its atomic writes
// ordering every load after them. Why an entry holds key and answer
// together: a hit then touches two places of memory, the slot and the
// entry. (BenchmarkHandleSpread; the figures, and those of the maps this
// replaced, are in docs/benchmarks.md.)
type memoShard struct {
	mu sync.Mutex // writers
	t  atomic.Pointer[memoTable]
	n  int // entries in t, under mu
	// What lookups in this shard found (svcnet_dns_memo_lookups_total):
	// an entry that holds, none, or one that no longer does. Counted
	// here, on a line of the shard, not on one line that every core's
	// lookups would write.
	hits, misses, stale atomic.Uint64
	// A shard fills two cache lines. The memo itself is not aligned to
	// them (the allocator puts it where it will), so a shard may share
	// its first and last line with its neighbours; its counters, though,
	// are never on another shard's counters' line.
	_ [128 - 8 - 8 - 8 - 24]byte
}

// memoTable is a shard's slots, a power of two of them.
type memoTable struct {
	slots []memoSlot
	mask  uint64
}

// A memoSlot is empty while h is 0 (a key whose hash is 0 is kept as 1).
type memoSlot struct {
	h atomic.Uint64
	e atomic.Pointer[memoEntry]
}

// memoSlots is a shard's table when it starts, and again after a reset.
const memoSlots = 1 << 10

func newMemoTable(n int) *memoTable {
	return &memoTable{slots: make([]memoSlot, n), mask: uint64(n - 1)}
}

// find returns the entry in t under hash h, if any. A table is never
// more than half full, so the probe ends at an empty slot.
func (t *memoTable) find(h uint64) *memoEntry {
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		switch sh := t.slots[i].h.Load(); sh {
		case h:
			return t.slots[i].e.Load()
		case 0:
			return nil
		}
	}
}

// insert puts e under hash h, in place of the entry of the same hash if
// there is one (it reports that): under s.mu.
func (s *memoShard) insert(h uint64, e *memoEntry) (replaced bool) {
	t := s.t.Load()
	if 2*(s.n+1) > len(t.slots) {
		g := newMemoTable(2 * len(t.slots))
		for i := range t.slots {
			if sh := t.slots[i].h.Load(); sh != 0 {
				g.put(sh, t.slots[i].e.Load())
			}
		}
		s.t.Store(g)
		t = g
	}
	if t.put(h, e) {
		return true
	}
	s.n++
	return false
}

// put fills the slot of h, or the first empty one from there.
func (t *memoTable) put(h uint64, e *memoEntry) (replaced bool) {
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		switch sh := t.slots[i].h.Load(); sh {
		case h:
			t.slots[i].e.Store(e)
			return true
		case 0:
			t.slots[i].e.Store(e) // before h: a lookup that sees h sees e
			t.slots[i].h.Store(h)
			return false
		}
	}
}

// len is the number of entries in the shard.
func (s *memoShard) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// A memoEntry is laid out for the hit: what it reads (gen, until,
// lengths, then key and answer side by side) fills the entry's first
// lines, so that a hit on an A answer reads three lines of it.
type memoEntry struct {
	// gen is the last snapshot deps were found to hold in: the check is
	// made once per entry and snapshot.
	gen   atomic.Uint64
	until time.Duration // since memoEpoch; 0: as long as deps hold
	klen  uint16
	wlen  uint16
	qtype uint16
	rcode uint16
	src   uint8 // index in sources
	deps  *index.Deps
	// The key, then the response with ID 0 and RD, CD clear: in the
	// entry's own allocation (256 bytes in all) when both fit, as
	// the A answer for a Service name of up to about 70 characters does
	// (a key and a response of twice the name's length and 40–50 bytes
	// more, EDNS or not; AAAA 6 characters less); else in far. SRV, headless Services with many
	// addresses and denials (which carry the SOA) are often too long.
	inline [memoInline]byte
	far    []byte
}

const memoInline = 256 - 8 - 8 - 4*2 - 8 - 8 - 24 // 192

// memoInlineAt is where inline lies in an entry.
const memoInlineAt = 256 - memoInline - 24

// bytes decides from the lengths, on the entry's first line, so that a
// hit on an inline entry does not read far, on its last.
func (e *memoEntry) bytes() []byte {
	if n := int(e.klen) + int(e.wlen); n <= memoInline {
		return e.inline[:n]
	}
	return e.far
}
func (e *memoEntry) key() []byte    { return e.bytes()[:e.klen] }
func (e *memoEntry) wire() []byte   { return e.bytes()[e.klen:] }
func (e *memoEntry) source() string { return sources[e.src] }

// maxMemo bounds the memo, so a client asking random names costs at most
// this many entries (a few hundred bytes each); a full memo starts again
// empty. It holds every Service name of a zone of 100,000 with room to
// spare: a smaller one, asked for all of them, would start again empty
// every few seconds and answer most questions the long way.
const maxMemo = 250000

// memoShardBits: the top bits of a key's hash choose its shard, its low
// bits the slot in the shard's table, so the keys of a shard, which
// share their top bits, still spread over the table.
const memoShardBits = 4

// memoSeed keys the hash; per process, so that no client can aim
// questions at one shard's bucket.
var memoSeed = maphash.MakeSeed()

// memoEpoch is what entries' until counts from: a time with the
// monotonic clock's reading, so that a step of the wall clock neither
// keeps a forwarded answer nor drops it early.
var memoEpoch = time.Now()

func newMemo() *memo {
	m := &memo{max: maxMemo}
	for i := range m.shards {
		m.shards[i].t.Store(newMemoTable(memoSlots))
	}
	return m
}

func (m *memo) shard(h uint64) *memoShard {
	return &m.shards[h>>(64-memoShardBits)]
}

// hash is never 0, a memoSlot's mark of empty.
func hash(key []byte) uint64 { return max(maphash.Bytes(memoSeed, key), 1) }

// ifKey is e if it holds key, else nil (another key of the same hash).
func (e *memoEntry) ifKey(key []byte) *memoEntry {
	if e == nil || !bytes.Equal(e.key(), key) {
		return nil
	}
	return e
}

// holds tells whether e, what a lookup in s found, holds in the snapshot
// idx at now, and counts the lookup.
func (s *memoShard) holds(e *memoEntry, now time.Time, idx *index.Index) bool {
	if e == nil {
		s.misses.Add(1)
		return false
	}
	if e.until != 0 && now.Sub(memoEpoch) >= e.until {
		s.stale.Add(1)
		return false
	}
	if gen := idx.Gen(); e.gen.Load() != gen {
		if !e.deps.Holds(idx) {
			s.stale.Add(1)
			return false
		}
		e.gen.Store(gen)
	}
	s.hits.Add(1)
	return true
}

// counts sums the shards' lookup counters.
func (m *memo) counts() (hits, misses, stale uint64) {
	for i := range m.shards {
		s := &m.shards[i]
		hits += s.hits.Load()
		misses += s.misses.Load()
		stale += s.stale.Load()
	}
	return hits, misses, stale
}

func (m *memo) put(key, wire []byte, qtype uint16, rcode int, source string, until time.Time, deps *index.Deps, gen uint64) {
	e := &memoEntry{klen: uint16(len(key)), wlen: uint16(len(wire)), qtype: qtype, rcode: uint16(rcode),
		src: uint8(sourceIndex(source)), deps: deps}
	if !until.IsZero() {
		e.until = max(until.Sub(memoEpoch), 1)
	}
	kw := e.inline[:0]
	if n := len(key) + len(wire); n > memoInline {
		kw = make([]byte, 0, n)
	}
	kw = append(append(kw, key...), wire...)
	if len(kw) > memoInline {
		e.far = kw
	}
	e.gen.Store(gen)
	w := e.wire()
	w[0], w[1] = 0, 0
	w[2] &^= 0x01 // RD
	w[3] &^= 0x10 // CD
	h := hash(key)
	s := m.shard(h)
	for {
		s.mu.Lock()
		if s.t.Load().find(h) != nil {
			// Stale, an expired repeat of the forward cache, or (rarely)
			// another key of the same hash: the newer answer takes the
			// place.
			s.insert(h, e)
			s.mu.Unlock()
			return
		}
		if m.n.Add(1) <= m.max {
			s.insert(h, e)
			s.mu.Unlock()
			return
		}
		m.n.Add(-1)
		s.mu.Unlock()
		m.reset()
	}
}

// reset empties a full memo (entries that no longer hold stay until
// their question is asked again, so a full memo is mostly such). Of the
// puts that find it full at once, the first empties it; the others find
// it no longer full. Entries put into a shard after it was emptied stay,
// and stay counted.
func (m *memo) reset() {
	m.resetMu.Lock()
	defer m.resetMu.Unlock()
	if m.n.Load() < m.max {
		return
	}
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n := s.n
		s.t.Store(newMemoTable(memoSlots))
		s.n = 0
		s.mu.Unlock()
		m.n.Add(-int32(n))
	}
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
