package server

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"
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

// batchConn is the batch I/O of x/net's ipv4 and ipv6 packet conns; both
// use the same Message type.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

// newBatchConn wraps the UDP socket for batch I/O, as the family of its
// address needs (a wildcard socket is dual-stack and IPv6).
func newBatchConn(c *net.UDPConn) batchConn {
	if a, ok := c.LocalAddr().(*net.UDPAddr); ok && a.IP.To4() != nil {
		return ipv4.NewPacketConn(c)
	}
	return ipv6.NewPacketConn(c)
}

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
	conn := newBatchConn(udp)
	in := make([]ipv4.Message, batchSize)
	out := make([]ipv4.Message, batchSize)
	outBufs := make([][]byte, batchSize)
	var key []byte
	for i := range in {
		in[i].Buffers = [][]byte{make([]byte, maxUDPQuery)}
		in[i].OOB = make([]byte, udpOOBSize)
		out[i].Buffers = make([][]byte, 1)
		outBufs[i] = make([]byte, 2*int(s.opts.UDPSize))
	}
	for {
		n, err := conn.ReadBatch(in, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			// ICMP errors from earlier sends surface here; keep serving,
			// but never spin on an error that repeats.
			s.log.Debug("dns udp read", "err", err)
			time.Sleep(time.Millisecond)
			continue
		}
		k := 0
		for i := range in[:n] {
			m := &in[i]
			addr, _ := m.Addr.(*net.UDPAddr)
			if addr == nil {
				continue
			}
			oob := replyOOB(m.OOB[:m.NN])
			resp, later := s.answerUDP(ctx, m.Buffers[0][:m.N], addr, outBufs[k], &key)
			if later != nil {
				if !s.answerLater(ctx, udp, *later, addr, oob) {
					return
				}
				continue
			}
			if resp == nil {
				continue
			}
			out[k].Buffers[0], out[k].OOB, out[k].Addr = resp, oob, addr
			k++
		}
		s.writeBatch(conn, out[:k])
	}
}

// answerUDP answers one datagram on the read loop, into buf: from the
// memo when the same question was answered from the same snapshot
// before, else through the full path (and into the memo when the answer
// depends on nothing but the question). A query that must wait for an
// upstream comes back as later instead.
func (s *Server) answerUDP(ctx context.Context, raw []byte, addr *net.UDPAddr, buf []byte, key *[]byte) ([]byte, *query) {
	client := addr.AddrPort().Addr().Unmap()
	m := s.memo.Load()
	k, memoable := []byte(nil), !s.opts.QueryLog && len(raw) >= 12 && raw[2]&0x80 == 0
	if memoable {
		k, memoable = memoKey(raw, s.opts.UDPSize, *key)
		*key = k
	}
	if memoable {
		start := time.Now()
		if e, ok := m.get(k, start); ok {
			resp := e.reply(raw, buf)
			if e.source == sourceForward {
				if c, ok := s.opts.Upstream.(CachedUpstream); ok {
					c.CountHit()
				}
			}
			s.m.count("udp", true, e.qtype, e.rcode, e.source)
			s.m.observe(e.source, time.Since(start).Seconds())
			return resp, nil
		}
	}
	// begin copies what it keeps out of raw, which the next ReadBatch
	// reuses.
	q := s.beginAt(m.idx, raw, client, false)
	if q.wait != nil {
		return nil, &q
	}
	resp := s.finish(&q, buf)
	if memoable && resp != nil && q.req != nil && len(q.req.Question) == 1 {
		zone := q.source == sourceZone && !(s.opts.Resolver.Autopath && q.resp.Rcode == dns.RcodeNameError)
		if zone || (q.source == sourceForward && !q.until.IsZero()) {
			m.put(k, resp, q.req.Question[0].Qtype, q.resp.Rcode, q.source, q.until)
		}
	}
	return resp, nil
}

// answerLater gives a query that waits for an upstream a goroutine of
// its own; false means the server is stopping.
func (s *Server) answerLater(ctx context.Context, udp *net.UDPConn, q query, addr *net.UDPAddr, oob []byte) bool {
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
			if _, _, err := udp.WriteMsgUDP(resp, oob, addr); err != nil && !errors.Is(err, net.ErrClosed) {
				s.log.Debug("dns udp write", "client", addr, "err", err)
			}
		}
	}()
	return true
}

// writeBatch sends ms, going past a message the kernel refuses (a
// client's ICMP error, say) so that one bad peer costs only its answer.
func (s *Server) writeBatch(conn batchConn, ms []ipv4.Message) {
	for len(ms) > 0 {
		n, err := conn.WriteBatch(ms, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Debug("dns udp write", "client", ms[0].Addr, "err", err)
			n = max(n, 1)
		}
		ms = ms[n:]
	}
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
