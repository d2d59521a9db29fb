package server

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/miekg/dns"
)

// serveUDP reads queries and answers each on its own goroutine, since an
// outside name may wait on an upstream for seconds. The inflight
// semaphore turns overload into kernel-side drops rather than unbounded
// goroutines.
func (s *Server) serveUDP(ctx context.Context) {
	defer s.wg.Done()
	for {
		bp := s.bufs.Get().(*[]byte)
		n, sess, err := dns.ReadFromSessionUDP(s.udp, *bp)
		if err != nil {
			s.bufs.Put(bp)
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			// ICMP errors from earlier sends surface here; keep serving,
			// but never spin on an error that repeats.
			s.log.Debug("dns udp read", "err", err)
			time.Sleep(time.Millisecond)
			continue
		}
		select {
		case s.inflight <- struct{}{}:
		case <-ctx.Done():
			s.bufs.Put(bp)
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.inflight }()
			defer s.bufs.Put(bp)
			resp := s.handle(ctx, (*bp)[:n], addrOf(sess.RemoteAddr()), false)
			if resp != nil {
				if _, err := dns.WriteToSessionUDP(s.udp, resp, sess); err != nil && !errors.Is(err, net.ErrClosed) {
					s.log.Debug("dns udp write", "client", sess.RemoteAddr(), "err", err)
				}
			}
		}()
	}
}
