package server

import (
	"encoding/binary"
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
}

type memoShard struct {
	mu sync.RWMutex
	m  map[string]*memoEntry
}

type memoEntry struct {
	wire   []byte // the response with ID 0 and RD, CD clear
	qtype  uint16
	rcode  int
	source string
	until  time.Time // zero: as long as deps hold
	deps   *index.Deps
	// gen is the last snapshot deps were found to hold in: the check is
	// made once per entry and snapshot.
	gen atomic.Uint64
}

// maxMemo bounds the memo, so a client asking random names costs at most
// this many entries (a few hundred bytes each); a full memo starts again
// empty. It holds every Service name of a zone of 100,000 with room to
// spare: a smaller one, asked for all of them, would start again empty
// every few seconds and answer most questions the long way.
const maxMemo = 250000

func newMemo() *memo {
	m := &memo{}
	for i := range m.shards {
		m.shards[i].m = map[string]*memoEntry{}
	}
	return m
}

func (m *memo) shard(key []byte) *memoShard {
	// The last bytes of the question name vary most between names of
	// one zone; qtype, qclass and the EDNS bytes follow them.
	var h uint32
	for _, b := range key[max(0, len(key)-16):] {
		h = h*31 + uint32(b)
	}
	return &m.shards[h%uint32(len(m.shards))]
}

// get returns the entry for key if it holds in the snapshot idx at now.
func (m *memo) get(key []byte, now time.Time, idx *index.Index) (*memoEntry, bool) {
	s := m.shard(key)
	s.mu.RLock()
	e, ok := s.m[string(key)] // no allocation for a lookup
	s.mu.RUnlock()
	if !ok || (!e.until.IsZero() && !now.Before(e.until)) {
		return nil, false
	}
	if gen := idx.Gen(); e.gen.Load() != gen {
		if !e.deps.Holds(idx) {
			return nil, false
		}
		e.gen.Store(gen)
	}
	return e, true
}

func (m *memo) put(key, wire []byte, qtype uint16, rcode int, source string, until time.Time, deps *index.Deps, gen uint64) {
	e := &memoEntry{wire: append([]byte(nil), wire...), qtype: qtype, rcode: rcode, source: source, until: until, deps: deps}
	e.gen.Store(gen)
	e.wire[0], e.wire[1] = 0, 0
	e.wire[2] &^= 0x01 // RD
	e.wire[3] &^= 0x10 // CD
	s := m.shard(key)
	s.mu.Lock()
	if _, ok := s.m[string(key)]; ok {
		s.m[string(key)] = e // stale, or an expired repeat of the forward cache
		s.mu.Unlock()
		return
	}
	if m.n.Add(1) > maxMemo {
		s.mu.Unlock()
		m.reset()
		return
	}
	s.m[string(key)] = e
	s.mu.Unlock()
}

// reset empties the memo (entries that no longer hold stay until their
// question is asked again, so a full memo is mostly such).
func (m *memo) reset() {
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		s.m = map[string]*memoEntry{}
		s.mu.Unlock()
	}
	m.n.Store(0)
}

// reply writes e as the response to query into buf: the query's ID and
// its RD and CD bits, which is all that differs between two asks of the
// same question.
func (e *memoEntry) reply(query, buf []byte) []byte {
	out := append(buf[:0], e.wire...)
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
