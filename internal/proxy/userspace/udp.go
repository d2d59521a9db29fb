package userspace

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// udpSocket relays datagrams between clients and endpoints. Each client
// address gets a session: a socket connected to one endpoint, so that
// replies find their way back, closed after a quiet period.
type udpSocket struct {
	pc      net.PacketConn
	bal     *balancer
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	timeout time.Duration
	logger  *slog.Logger
	onFail  func()

	mu       sync.Mutex
	sessions map[string]*udpSession
	wg       sync.WaitGroup
}

type udpSession struct {
	conn     net.Conn
	endpoint string
	last     atomic.Int64 // unix nanoseconds of the last datagram from the client
}

func (s *udpSocket) port() int { return s.pc.LocalAddr().(*net.UDPAddr).Port }

func (s *udpSocket) close() error {
	err := s.pc.Close()
	s.mu.Lock()
	for k, sess := range s.sessions {
		_ = sess.conn.Close()
		delete(s.sessions, k)
	}
	s.mu.Unlock()
	return err
}

func (s *udpSocket) serve() {
	buf := make([]byte, 65535)
	for {
		n, from, err := s.pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		sess := s.session(from)
		if sess == nil {
			continue // no endpoint: dropped, as a datagram to nowhere is
		}
		sess.last.Store(time.Now().UnixNano())
		if _, err := sess.conn.Write(buf[:n]); err != nil {
			// The endpoint went away (ICMP unreachable surfaces here or in
			// the reply loop): the next datagram starts a new session.
			s.drop(from.String(), sess)
		}
	}
}

func (s *udpSocket) session(from net.Addr) *udpSession {
	key := from.String()
	s.mu.Lock()
	sess := s.sessions[key]
	s.mu.Unlock()
	if sess != nil {
		return sess
	}
	client := clientAddr(from)
	tried := map[string]bool{}
	for i := 0; i < maxTries; i++ {
		ep, ok := s.bal.pick(client, tried)
		if !ok {
			return nil
		}
		tried[ep] = true
		ctx, cancel := context.WithTimeout(context.Background(), dialTimeouts[0])
		conn, err := s.dial(ctx, "udp", ep)
		cancel()
		if err != nil {
			if s.onFail != nil {
				s.onFail()
			}
			continue
		}
		sess = &udpSession{conn: conn, endpoint: ep}
		sess.last.Store(time.Now().UnixNano())
		s.mu.Lock()
		if s.sessions == nil {
			s.sessions = map[string]*udpSession{}
		}
		s.sessions[key] = sess
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.replies(from, sess)
		}()
		return sess
	}
	return nil
}

// replies sends what the endpoint answers back to the client from the
// proxy socket (so, from the service address, after conntrack reverses
// the REDIRECT), until the session has been quiet for the timeout.
func (s *udpSocket) replies(client net.Addr, sess *udpSession) {
	defer s.drop(client.String(), sess)
	buf := make([]byte, 65535)
	for {
		_ = sess.conn.SetReadDeadline(time.Now().Add(s.timeout))
		n, err := sess.conn.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && time.Since(time.Unix(0, sess.last.Load())) < s.timeout {
				continue // the client spoke recently; keep waiting
			}
			return
		}
		if _, err := s.pc.WriteTo(buf[:n], client); err != nil {
			return
		}
	}
}

func (s *udpSocket) drop(key string, sess *udpSession) {
	s.mu.Lock()
	if s.sessions[key] == sess {
		delete(s.sessions, key)
	}
	s.mu.Unlock()
	_ = sess.conn.Close()
}

// dropStale ends the sessions whose endpoint is not in endpoints.
func (s *udpSocket) dropStale(endpoints []string) {
	s.mu.Lock()
	var stale []*udpSession
	for k, sess := range s.sessions {
		if !slices.Contains(endpoints, sess.endpoint) {
			stale = append(stale, sess)
			delete(s.sessions, k)
		}
	}
	s.mu.Unlock()
	for _, sess := range stale {
		_ = sess.conn.Close()
	}
}
