package server

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/dns/index"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// batchSize is how many datagrams one system call reads or writes
// (recvmmsg and sendmmsg on Linux). Under load the kernel queues
// queries faster than one read per query can take them; a batch drains
// the queue in one call and answers it in one, which halves the CPU
// spent in system calls and with it the queueing delay.
const batchSize = 32

// udpOOBSize fits the control messages (destination address, interface)
// of either family.
var udpOOBSize = max(len(ipv4.NewControlMessage(ipv4.FlagDst|ipv4.FlagInterface)),
	len(ipv6.NewControlMessage(ipv6.FlagDst|ipv6.FlagInterface)))

// serveUDP is one of GOMAXPROCS read loops, each on a socket of its own.
// A loop answers what the zone or the forward cache can answer on the
// spot, in its own buffers: no
// goroutine, no stack to grow, no allocation for the wire, which is what
// the bulk of a cluster's queries (cluster names, cached outside names,
// the NXDOMAINs of search-path walks) cost. Only a question that must
// wait for an upstream gets a goroutine, bounded by the inflight
// semaphore, which turns overload into kernel-side drops rather than
// unbounded goroutines.
func (s *Server) serveUDP(ctx context.Context, udp *net.UDPConn) {
	defer s.wg.Done()
	io, err := newBatchIO(udp, batchSize, maxUDPQuery, udpOOBSize)
	if err != nil {
		s.log.Error("dns udp", "err", err)
		return
	}
	out := make([]outMsg, 0, batchSize)
	outBufs := make([][]byte, batchSize)
	for i := range outBufs {
		outBufs[i] = make([]byte, 2*int(s.opts.UDPSize))
	}
	looks := make([]memoLook, batchSize)
	for {
		n, err := io.read()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			// Errors queued on the socket surface here; keep serving,
			// but never spin on an error that repeats.
			s.log.Debug("dns udp read", "err", err)
			time.Sleep(time.Millisecond)
			continue
		}
		// The batch's memo entries are found first, then read, before
		// any query is answered: at 100,000 names few slots and entries
		// are in the CPU's caches, and loads that wait for nothing
		// before them overlap their misses, where one query after
		// another waited for each of its own. (A question asked twice
		// in one batch, new or stale, thus takes the long way twice.)
		for i := range n {
			raw, from, _ := io.msg(i) // looks are empty: cleared after each batch
			if from.IsValid() {
				s.lookUp(raw, &looks[i])
			}
		}
		find(looks[:n])
		verify(looks[:n])
		out = out[:0]
		for i := range n {
			raw, from, oobIn := io.msg(i)
			if !from.IsValid() {
				continue
			}
			oob := replyOOB(oobIn)
			resp, later := s.answerLooked(ctx, raw, from, outBufs[len(out)], &looks[i])
			if later != nil {
				if !s.answerLater(ctx, udp, *later, from, oob) {
					return
				}
				continue
			}
			if resp == nil {
				continue
			}
			out = append(out, outMsg{buf: resp, oob: oob, to: from})
		}
		// Entries and tables are not kept past their batch: after a
		// reset they would hold the memo that was emptied.
		for i := range n {
			looks[i].e, looks[i].s, looks[i].t = nil, nil, nil
		}
		if err := io.write(out); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Debug("dns udp write", "err", err)
		}
	}
}

// memoLook is a datagram's memo key and the entry found under it.
type memoLook struct {
	key      []byte // its buffer is reused from batch to batch
	memoable bool
	h        uint64
	s        *memoShard
	t        *memoTable
	e        *memoEntry // after verify: one that holds key, if any
	touched  uint64     // what find and verify read ahead: kept, so that the reads stay
}

// lookUp finds raw's key, its hash and the table of its shard.
func (s *Server) lookUp(raw []byte, l *memoLook) {
	l.e, l.s, l.t = nil, nil, nil
	l.memoable = !s.opts.QueryLog && len(raw) >= 12 && raw[2]&0x80 == 0
	if !l.memoable {
		return
	}
	var k []byte
	if k, l.memoable = memoKey(raw, s.opts.UDPSize, l.key); l.memoable {
		l.key = k
		l.h = hash(k)
		l.s = s.memo.shard(l.h)
		l.t = l.s.t.Load()
	}
}

// find reads the slot of every key, then finds each one's candidate
// entry (memoTable.find). The first loop does nothing but loads that
// wait for nothing before them, so the CPU has the misses of many slots
// in flight at once; the finds then read them from its caches.
func find(looks []memoLook) {
	for i := range looks {
		if l := &looks[i]; l.t != nil {
			l.touched = l.t.slots[l.h&l.t.mask].h.Load()
		}
	}
	for i := range looks {
		if l := &looks[i]; l.t != nil {
			l.e = l.t.find(l.h)
		}
	}
}

// verify keeps the candidates that hold their key (memoEntry.ifKey). It
// first reads the three lines of each entry that a hit reads, as find
// the slots.
func verify(looks []memoLook) {
	for i := range looks {
		if e := looks[i].e; e != nil {
			// Its first three lines, where a hit reads an inline entry.
			looks[i].touched += uint64(e.klen) + uint64(e.inline[64-memoInlineAt]) + uint64(e.inline[128-memoInlineAt])
		}
	}
	for i := range looks {
		if l := &looks[i]; l.e != nil {
			if l.e = l.e.ifKey(l.key); l.e != nil {
				w := l.e.wire()
				l.touched += uint64(w[len(w)-1])
			}
		}
	}
}

// answerLooked answers one datagram on the read loop, into buf, once
// its memo entry was looked up (lookUp, find, verify): from the memo
// when the same question was answered from the same snapshot before,
// else through the full path (and into the memo when the answer depends
// on nothing but the question). A query that must wait for an upstream
// comes back as later instead.
func (s *Server) answerLooked(ctx context.Context, raw []byte, from netip.AddrPort, buf []byte, l *memoLook) ([]byte, *query) {
	client := from.Addr().Unmap()
	m, idx := s.memo, s.idx.Load()
	k, memoable := l.key, l.memoable
	var deps *index.Deps
	if memoable {
		start := time.Now()
		if e := l.e; l.s.holds(e, start, idx) {
			resp := e.reply(raw, buf)
			if e.src == srcForward {
				if c, ok := s.opts.Upstream.(CachedUpstream); ok {
					c.CountHit()
				}
			}
			s.m.count("udp", true, e.qtype, int(e.rcode), e.source())
			s.m.observe(e.source(), time.Since(start).Seconds())
			return resp, nil
		}
		// Answer from a copy of the snapshot that notes what the answer
		// reads, for the memo.
		idx, deps = idx.Record()
	}
	// begin copies what it keeps out of raw, which the next ReadBatch
	// reuses.
	q := s.beginAt(idx, raw, client, false)
	if q.wait != nil {
		return nil, &q
	}
	resp := s.finish(&q, buf)
	if memoable && resp != nil && q.req != nil && len(q.req.Question) == 1 {
		zone := q.source == sourceZone && !(s.opts.Resolver.Autopath && q.resp.Rcode == dns.RcodeNameError)
		if zone || (q.source == sourceForward && !q.until.IsZero()) {
			m.put(k, resp, q.req.Question[0].Qtype, q.resp.Rcode, q.source, q.until, deps, idx.Gen())
		}
	}
	return resp, nil
}

// answerLater gives a query that waits for an upstream a goroutine of
// its own; false means the server is stopping.
func (s *Server) answerLater(ctx context.Context, udp *net.UDPConn, q query, to netip.AddrPort, oob []byte) bool {
	select {
	case s.inflight <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { <-s.inflight }()
		q.resp, q.source = q.wait(ctx)
		if resp := s.finish(&q, nil); resp != nil {
			if _, _, err := udp.WriteMsgUDPAddrPort(resp, oob, to); err != nil && !errors.Is(err, net.ErrClosed) {
				s.log.Debug("dns udp write", "client", to, "err", err)
			}
		}
	}()
	return true
}

// replyOOB turns a query's control messages into the reply's: the
// source address is the address the query was sent to, which is what a
// client on a multi-homed host checks (wildcard sockets only; a socket
// bound to one address gets no control messages).
func replyOOB(oob []byte) []byte {
	if len(oob) == 0 {
		return nil
	}
	var dst netip.Addr
	cm6 := new(ipv6.ControlMessage)
	if cm6.Parse(oob) == nil && cm6.Dst != nil {
		dst, _ = netip.AddrFromSlice(cm6.Dst)
	} else if cm4 := new(ipv4.ControlMessage); cm4.Parse(oob) == nil && cm4.Dst != nil {
		dst, _ = netip.AddrFromSlice(cm4.Dst)
	}
	if !dst.IsValid() {
		return nil
	}
	dst = dst.Unmap()
	if dst.Is4() {
		return (&ipv4.ControlMessage{Src: dst.AsSlice()}).Marshal()
	}
	return (&ipv6.ControlMessage{Src: dst.AsSlice()}).Marshal()
}
