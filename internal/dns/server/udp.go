package server

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/miekg/dns"
)

// serveUDP is one of GOMAXPROCS read loops. A loop answers what the zone
// or the forward cache can answer on the spot, in its own buffers: no
// goroutine, no stack to grow, no allocation for the wire, which is what
// the bulk of a cluster's queries (cluster names, cached outside names,
// the NXDOMAINs of search-path walks) cost. Only a question that must
// wait for an upstream gets a goroutine, bounded by the inflight
// semaphore, which turns overload into kernel-side drops rather than
// unbounded goroutines.
func (s *Server) serveUDP(ctx context.Context) {
	defer s.wg.Done()
	in := make([]byte, maxUDPQuery)
	out := make([]byte, dns.MaxMsgSize)
	for {
		n, sess, err := dns.ReadFromSessionUDP(s.udp, in)
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
		// begin copies what it keeps out of in, so the buffer is free
		// again as soon as it returns.
		q := s.begin(in[:n], addrOf(sess.RemoteAddr()), false)
		if q.wait == nil {
			s.writeUDP(s.finish(&q, out), sess)
			continue
		}
		select {
		case s.inflight <- struct{}{}:
		case <-ctx.Done():
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.inflight }()
			q.resp, q.source = q.wait(ctx)
			s.writeUDP(s.finish(&q, nil), sess)
		}()
	}
}

func (s *Server) writeUDP(resp []byte, sess *dns.SessionUDP) {
	if resp == nil {
		return
	}
	if _, err := dns.WriteToSessionUDP(s.udp, resp, sess); err != nil && !errors.Is(err, net.ErrClosed) {
		s.log.Debug("dns udp write", "client", sess.RemoteAddr(), "err", err)
	}
}
