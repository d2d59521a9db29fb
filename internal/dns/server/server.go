// Package server is svcnet's DNS server: UDP and TCP listeners that answer
// the cluster zone from the current index.Index and send every other
// question to the upstreams.
//
// The index sits in an atomic pointer that the informer side swaps on
// each change; there is no cache in front of the zone, so an answer is
// never older than the last swap.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/dns/index"
	"github.com/svcnet/svcnet/internal/dns/resolver"
)

// Upstream answers outside questions; *forward.Forwarder is one. The
// returned message belongs to the caller.
type Upstream interface {
	Exchange(ctx context.Context, q dns.Question, do bool) (*dns.Msg, error)
}

// CachedUpstream is an Upstream with a cache that can be asked without
// waiting (*forward.Forwarder is one). The server answers cache hits on
// its read loop and gives only misses a goroutine.
type CachedUpstream interface {
	Upstream
	// Cached answers from the cache alone. The message belongs to the
	// caller; until is when the cache's answer changes (its TTLs age or
	// it expires), and the server may repeat this one until then.
	Cached(q dns.Question, do bool) (m *dns.Msg, until time.Time, ok bool)
	// CountHit records a cache hit answered with such a repeat.
	CountHit()
}

// Options configure a Server.
type Options struct {
	// Zone is served with SERVFAIL until the first SetIndex, so that no
	// client caches an NXDOMAIN given before the informers synced.
	Zone string
	// Resolver configures autopath.
	Resolver resolver.Config
	// Upstream answers names outside the zone. Without one they are
	// REFUSED, as an authoritative-only server does.
	Upstream Upstream
	// Registerer receives the metrics; nil keeps them unregistered.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// QueryLog logs one line per query at Info level.
	QueryLog bool
	// UDPSize is the largest UDP response sent and the EDNS size
	// advertised; 1232 by default (DNS Flag Day 2020).
	UDPSize uint16
	// ForwardTimeout bounds the wait for upstreams on one query.
	ForwardTimeout time.Duration
	// MaxInflight bounds UDP queries being answered at once; when it is
	// reached the server stops reading and the kernel queues or drops.
	MaxInflight int
	// MaxTCPConns bounds open TCP connections; more are closed at once.
	MaxTCPConns int
	// TCPIdleTimeout closes TCP connections without a query for that
	// long (RFC 7766 suggests seconds, not minutes).
	TCPIdleTimeout time.Duration
}

// Server is a DNS server. Create it with New, bind it with Listen, run it
// with Serve; SetIndex may be called at any time from any goroutine.
type Server struct {
	opts     Options
	idx      atomic.Pointer[index.Index]
	memo     *memo // packed answers, each with what it was read from
	resolver *resolver.Resolver
	log      *slog.Logger
	m        *metrics

	udp      []*net.UDPConn // one per read loop, sharing a port
	tcp      net.Listener
	inflight chan struct{}
	tcpConns chan struct{}
	bufs     sync.Pool
	wg       sync.WaitGroup
}

// maxUDPQuery is the read buffer of one UDP query. Queries are tiny; a
// datagram larger than this is cut by the kernel and gets FORMERR.
const maxUDPQuery = 4096

// New returns a server that answers SERVFAIL for the zone until SetIndex
// gives it a synced index.
func New(opts Options) (*Server, error) {
	opts.UDPSize = max(cmp.Or(opts.UDPSize, 1232), dns.MinMsgSize)
	opts.ForwardTimeout = cmp.Or(opts.ForwardTimeout, 5*time.Second)
	opts.MaxInflight = cmp.Or(opts.MaxInflight, 4096)
	opts.MaxTCPConns = cmp.Or(opts.MaxTCPConns, 256)
	opts.TCPIdleTimeout = cmp.Or(opts.TCPIdleTimeout, 10*time.Second)
	s := &Server{
		opts:     opts,
		resolver: resolver.New(opts.Resolver),
		log:      cmp.Or(opts.Logger, slog.Default()),
		inflight: make(chan struct{}, opts.MaxInflight),
		tcpConns: make(chan struct{}, opts.MaxTCPConns),
	}
	s.bufs.New = func() any { b := make([]byte, maxUDPQuery); return &b }
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	s.m = m
	s.idx.Store(index.Build(index.Options{Zone: opts.Zone, NotSynced: true}, nil, nil, nil))
	s.memo = newMemo()
	if err := registerMemo(opts.Registerer, s.memo); err != nil {
		return nil, err
	}
	return s, nil
}

// SetIndex makes idx the zone. changed, when known, is when the newest
// API change in idx happened; the time from it to now is the
// programming latency metric. A nil idx puts the zone back to SERVFAIL.
func (s *Server) SetIndex(idx *index.Index, changed time.Time) {
	if idx == nil {
		idx = index.Build(index.Options{Zone: s.opts.Zone, NotSynced: true}, nil, nil, nil)
	}
	s.idx.Store(idx)
	s.m.updates.Inc()
	if idx.Synced() {
		s.m.synced.Set(1)
	} else {
		s.m.synced.Set(0)
	}
	s.m.services.Set(float64(idx.Services()))
	if !changed.IsZero() {
		s.m.programming.Observe(time.Since(changed).Seconds())
	}
}

// Ready reports whether the zone is served from synced data (/readyz).
func (s *Server) Ready() bool { return s.idx.Load().Synced() }

// Listen binds UDP and TCP on addr. With port 0 both get the same random
// port, which is what tests and resolv.conf need.
//
// UDP gets one socket per read loop (GOMAXPROCS of them), bound to the
// same port with SO_REUSEPORT, and the kernel spreads clients over them
// by address. Loops sharing one socket would not read in parallel: Go
// serialises reads on a socket, and the hand-offs between loops waiting
// for it cost more than a second loop gains (dnsperf, docs/benchmarks.md).
func (s *Server) Listen(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("dns listen %q: %w", addr, err)
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return fmt.Errorf("dns listen %q: %w", addr, err)
	}
	tries := 1
	if port == "0" {
		tries = 20
	}
	for range tries {
		udp, err := ListenUDPGroup(ua, max(1, runtime.GOMAXPROCS(0)))
		if err != nil {
			return fmt.Errorf("dns listen udp %q: %w", addr, err)
		}
		tcp, err := net.Listen("tcp", net.JoinHostPort(host, fmt.Sprint(udp[0].LocalAddr().(*net.UDPAddr).Port)))
		if err != nil {
			closeAll(udp)
			if port == "0" {
				continue // that port is free for UDP only; draw another
			}
			return fmt.Errorf("dns listen tcp %q: %w", addr, err)
		}
		if ua.IP == nil || ua.IP.IsUnspecified() {
			// On a wildcard socket, answer from the address the query was
			// sent to, or clients on multi-homed hosts drop the reply.
			for _, c := range udp {
				e4 := ipv4.NewPacketConn(c).SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true)
				e6 := ipv6.NewPacketConn(c).SetControlMessage(ipv6.FlagDst|ipv6.FlagInterface, true)
				if e4 != nil && e6 != nil {
					s.log.Warn("cannot learn query destinations on a wildcard socket", "err", e4)
					break
				}
			}
		}
		s.udp, s.tcp = udp, tcp
		return nil
	}
	return fmt.Errorf("dns listen %q: no port free for both UDP and TCP", addr)
}

// ListenUDPGroup binds n UDP sockets to ua with SO_REUSEPORT, the first
// choosing the port when ua's is 0 and the others joining it: the socket
// layout of the server's read loops (the dnsperf benchmark's floor
// responder uses it too). The first is bound without SO_REUSEPORT, which
// it gets only once bound: so the bind fails on a port another socket
// holds, even one in a reuseport group of the same user, and port 0 never
// picks such a port — the group never shares its queries with a stranger.
func ListenUDPGroup(ua *net.UDPAddr, n int) ([]*net.UDPConn, error) {
	first, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	group := []*net.UDPConn{first}
	if err := setReusePort(first); err != nil {
		closeAll(group)
		return nil, err
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error { return reusePort(c) }}
	at := first.LocalAddr().String()
	for range n - 1 {
		pc, err := lc.ListenPacket(context.Background(), "udp", at)
		if err != nil {
			closeAll(group)
			return nil, err
		}
		group = append(group, pc.(*net.UDPConn))
	}
	return group, nil
}

func setReusePort(c *net.UDPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	return reusePort(rc)
}

func reusePort(c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	return serr
}

func closeAll(cs []*net.UDPConn) {
	for _, c := range cs {
		c.Close()
	}
}

// Addr is the bound address (host:port), after Listen.
func (s *Server) Addr() string {
	if s.udp == nil {
		return ""
	}
	return s.udp[0].LocalAddr().String()
}

// Serve answers queries until ctx ends, then closes the listeners and
// waits for queries in progress.
func (s *Server) Serve(ctx context.Context) error {
	if s.udp == nil {
		return errors.New("dns serve: Listen first")
	}
	for _, c := range s.udp {
		s.wg.Add(1)
		go s.serveUDP(ctx, c)
	}
	s.wg.Add(1)
	go s.serveTCP(ctx)
	if s.opts.Resolver.ForwardAll {
		s.log.Info("DNS server listening, forwarding every question", "addr", s.Addr())
	} else {
		s.log.Info("DNS server listening", "addr", s.Addr(), "zone", s.idx.Load().Zone())
	}
	<-ctx.Done()
	closeAll(s.udp)
	s.tcp.Close()
	s.wg.Wait()
	return nil
}

func addrOf(a net.Addr) netip.Addr {
	switch v := a.(type) {
	case *net.UDPAddr:
		return v.AddrPort().Addr().Unmap()
	case *net.TCPAddr:
		return v.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}
