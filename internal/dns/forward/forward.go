// Package forward sends the questions the cluster zone does not own to
// upstream servers: a cache in front (TTL-respecting, with negative
// caching), failover between upstreams with health checks, and a TCP
// retry when a UDP answer comes back truncated.
//
// Nothing in the cluster zone passes through here, so the zone keeps
// answering when every upstream is down.
package forward

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults, chosen as CoreDNS's forward and cache plugins choose them
// where they have an equivalent.
const (
	DefaultTimeout        = 2 * time.Second
	DefaultCacheSize      = 10000
	DefaultMaxTTL         = time.Hour
	DefaultMaxNegativeTTL = 5 * time.Minute
	DefaultFailThreshold  = 2
	DefaultProbeInterval  = 500 * time.Millisecond
	// DefaultUDPSize is the EDNS buffer size of DNS Flag Day 2020, which
	// avoids IP fragmentation on the usual MTUs.
	DefaultUDPSize = 1232
)

// Options configure a Forwarder.
type Options struct {
	// Upstreams are host:port addresses, tried in order.
	Upstreams []string
	// Timeout bounds one attempt at one upstream.
	Timeout time.Duration
	// CacheSize is the number of answers kept; negative disables caching.
	CacheSize int
	// MaxTTL and MaxNegativeTTL cap how long answers and denials are kept.
	MaxTTL         time.Duration
	MaxNegativeTTL time.Duration
	// FailThreshold is how many failures in a row mark an upstream down.
	FailThreshold int
	// ProbeInterval is how often a down upstream is probed.
	ProbeInterval time.Duration
	// UDPSize is the EDNS buffer size advertised to upstreams.
	UDPSize uint16
	// TCP sends every question over TCP, on connections kept open for
	// the next (RFC 7766), as the node-local cache talks to the cluster
	// DNS: its clients' UDP never reaches conntrack, and a server that
	// died refuses the connection at once instead of staying silent.
	TCP bool
	// Spread starts each question at the next healthy upstream in turn
	// rather than the first, for upstreams that are replicas of one
	// server; failover still tries the others.
	Spread bool
	// Registerer receives the metrics; nil keeps them unregistered.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Now is the clock of the cache; tests replace it.
	Now func() time.Time
}

// ErrNoUpstream is returned when no upstream answered.
var ErrNoUpstream = errors.New("no upstream answered")

// Forwarder resolves outside names. It is safe for concurrent use.
type Forwarder struct {
	opts      Options
	upstreams atomic.Pointer[[]*upstream]
	next      atomic.Uint32 // Spread's turn
	cache     *cache
	flight    flight
	log       *slog.Logger
	m         *metrics

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type upstream struct {
	addr    string
	fails   atomic.Int32
	down    atomic.Bool
	probing atomic.Bool
	// removed is set once SetUpstreams dropped it: its probe stops and
	// its connections close.
	removed atomic.Bool
	// idle are kept-open TCP connections (Options.TCP).
	idle chan *dns.Conn
}

// maxIdleConns bounds the kept-open TCP connections per upstream: more
// questions at once dial more, and the extra ones close after use.
const maxIdleConns = 16

func newUpstream(addr string) (*upstream, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("forward: upstream %q: %w", addr, err)
	}
	return &upstream{addr: addr, idle: make(chan *dns.Conn, maxIdleConns)}, nil
}

// take returns a kept-open connection, if there is one.
func (u *upstream) take() *dns.Conn {
	select {
	case c := <-u.idle:
		return c
	default:
		return nil
	}
}

// keep returns c to the pool, or closes it when the pool is full or the
// upstream is gone.
func (u *upstream) keep(c *dns.Conn) {
	if !u.removed.Load() {
		select {
		case u.idle <- c:
			return
		default:
		}
	}
	c.Close()
}

// closeIdle closes the kept-open connections.
func (u *upstream) closeIdle() {
	for {
		select {
		case c := <-u.idle:
			c.Close()
		default:
			return
		}
	}
}

// New returns a forwarder; Close stops its health probes.
func New(opts Options) (*Forwarder, error) {
	f, err := newForwarder(opts)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer, f.cacheLen)
	if err != nil {
		return nil, err
	}
	f.start(m)
	return f, nil
}

// cacheLen is the number of answers cached.
func (f *Forwarder) cacheLen() int {
	if f == nil || f.cache == nil {
		return 0
	}
	return f.cache.len()
}

// newForwarder returns a forwarder to start with the metrics it counts
// into, which several forwarders may share (a Router's).
func newForwarder(opts Options) (*Forwarder, error) {
	if len(opts.Upstreams) == 0 {
		return nil, errors.New("forward: no upstream servers")
	}
	opts.Timeout = cmp.Or(opts.Timeout, DefaultTimeout)
	opts.CacheSize = cmp.Or(opts.CacheSize, DefaultCacheSize)
	opts.MaxTTL = cmp.Or(opts.MaxTTL, DefaultMaxTTL)
	opts.MaxNegativeTTL = cmp.Or(opts.MaxNegativeTTL, DefaultMaxNegativeTTL)
	opts.FailThreshold = cmp.Or(opts.FailThreshold, DefaultFailThreshold)
	opts.ProbeInterval = cmp.Or(opts.ProbeInterval, DefaultProbeInterval)
	opts.UDPSize = cmp.Or(opts.UDPSize, DefaultUDPSize)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	f := &Forwarder{opts: opts, log: cmp.Or(opts.Logger, slog.Default())}
	var ups []*upstream
	for _, a := range opts.Upstreams {
		u, err := newUpstream(a)
		if err != nil {
			return nil, err
		}
		ups = append(ups, u)
	}
	f.upstreams.Store(&ups)
	if opts.CacheSize > 0 {
		f.cache = newCache(opts.CacheSize)
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f, nil
}

func (f *Forwarder) start(m *metrics) {
	f.m = m
	for _, u := range *f.upstreams.Load() {
		f.m.healthy.WithLabelValues(u.addr).Set(1)
	}
}

// Close stops the health probes, waits for them and closes the kept-open
// connections.
func (f *Forwarder) Close() {
	f.cancel()
	f.wg.Wait()
	for _, u := range *f.upstreams.Load() {
		u.removed.Store(true)
		u.closeIdle()
	}
}

// SetUpstreams replaces the upstreams (the node-local cache follows the
// cluster DNS's endpoints). Those that stay keep their health and
// connections; questions already under way finish with the old list.
func (f *Forwarder) SetUpstreams(addrs []string) error {
	if len(addrs) == 0 {
		return errors.New("forward: no upstream servers")
	}
	old := map[string]*upstream{}
	for _, u := range *f.upstreams.Load() {
		old[u.addr] = u
	}
	ups := make([]*upstream, 0, len(addrs))
	for _, a := range addrs {
		if u, ok := old[a]; ok {
			ups = append(ups, u)
			delete(old, a)
			continue
		}
		u, err := newUpstream(a)
		if err != nil {
			return err
		}
		ups = append(ups, u)
		f.m.healthy.WithLabelValues(a).Set(1)
	}
	f.upstreams.Store(&ups)
	for _, u := range old {
		u.removed.Store(true)
		u.closeIdle()
		// A replica's address leaves with it: its series would pile up.
		f.m.healthy.DeleteLabelValues(u.addr)
		f.m.requests.DeletePartialMatch(prometheus.Labels{"upstream": u.addr})
		f.m.duration.DeleteLabelValues(u.addr)
		f.m.probeFailures.DeleteLabelValues(u.addr)
	}
	return nil
}

// Upstreams returns the addresses in use, in order.
func (f *Forwarder) Upstreams() []string {
	var out []string
	for _, u := range *f.upstreams.Load() {
		out = append(out, u.addr)
	}
	return out
}

// Healthy reports how many upstreams are not marked down.
func (f *Forwarder) Healthy() int {
	n := 0
	for _, u := range *f.upstreams.Load() {
		if !u.down.Load() {
			n++
		}
	}
	return n
}

// Exchange answers q from the cache or an upstream. The returned message
// belongs to the caller; its ID and question are the caller's to set.
func (f *Forwarder) Exchange(ctx context.Context, q dns.Question, do bool) (*dns.Msg, error) {
	q.Name = strings.ToLower(dns.Fqdn(q.Name))
	k := cacheKey{q.Name, q.Qtype, q.Qclass, do}
	if f.cache != nil {
		if m, _, ok := f.cache.get(k, f.opts.Now()); ok {
			f.m.cacheHits.Inc()
			return m, nil
		}
		f.m.cacheMisses.Inc()
	}
	// Concurrent misses for one name share one upstream query, so a burst
	// (every pod of a Deployment starting at once) costs the upstream one.
	m, err := f.flight.do(ctx, k, func() (*dns.Msg, error) {
		m, err := f.query(ctx, q, do)
		if err == nil && f.cache != nil {
			if ttl, ok := cacheTTL(m, f.opts.MaxTTL, f.opts.MaxNegativeTTL); ok {
				if len(m.Answer) == 0 {
					clampDenial(m, ttl)
				}
				f.cache.put(k, m, ttl, f.opts.Now())
			}
		}
		return m, err
	})
	if err != nil {
		return nil, err
	}
	return m.Copy(), nil
}

// Cached answers q from the cache alone, never waiting on an upstream;
// a miss is for Exchange (which counts it). until is when the answer
// changes (its TTLs age by a second, or it expires): until then the
// server may repeat it without asking again. The returned message
// belongs to the caller.
func (f *Forwarder) Cached(q dns.Question, do bool) (m *dns.Msg, until time.Time, ok bool) {
	if f.cache == nil {
		return nil, time.Time{}, false
	}
	m, until, ok = f.cache.get(cacheKey{strings.ToLower(dns.Fqdn(q.Name)), q.Qtype, q.Qclass, do}, f.opts.Now())
	if ok {
		f.m.cacheHits.Inc()
	}
	return m, until, ok
}

// CountHit counts a cache hit that the server answered by repeating an
// earlier answer of Cached.
func (f *Forwarder) CountHit() { f.m.cacheHits.Inc() }

// clampDenial sets the SOA of a cached denial to the time the denial is
// kept (RFC 2308 section 5), so it ages to zero with the entry and no
// cache downstream keeps the denial longer than this one does.
func clampDenial(m *dns.Msg, ttl time.Duration) {
	for _, rr := range m.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			soa.Hdr.Ttl = uint32(ttl / time.Second)
		}
	}
}

// query asks the healthy upstreams in order, or all of them when none is
// healthy (a probe may simply not have noticed the recovery yet). Only
// silence fails over: an answer, SERVFAIL included, is the upstream's
// verdict on the name, and asking the next would double the wait for
// names whose own servers are broken.
func (f *Forwarder) query(ctx context.Context, q dns.Question, do bool) (*dns.Msg, error) {
	all := *f.upstreams.Load()
	order := make([]*upstream, 0, len(all))
	for _, u := range all {
		if !u.down.Load() {
			order = append(order, u)
		}
	}
	if len(order) == 0 {
		order = append(order, all...)
	}
	if f.opts.Spread && len(order) > 1 {
		// Rotate in place (order is this query's own slice): no
		// allocation on the path every cache miss takes.
		first := int(f.next.Add(1) % uint32(len(order)))
		slices.Reverse(order[:first])
		slices.Reverse(order[first:])
		slices.Reverse(order)
	}
	var errs []error
	for _, u := range order {
		if ctx.Err() != nil {
			break
		}
		start := time.Now()
		m, err := f.attempt(ctx, u, q, do)
		f.m.duration.WithLabelValues(u.addr).Observe(time.Since(start).Seconds())
		if err != nil {
			f.m.requests.WithLabelValues(u.addr, "error").Inc()
			if ctx.Err() == nil { // the caller giving up says nothing about the upstream
				f.failed(u, err)
			}
			errs = append(errs, fmt.Errorf("%s: %w", u.addr, err))
			continue
		}
		f.m.requests.WithLabelValues(u.addr, dns.RcodeToString[m.Rcode]).Inc()
		f.succeeded(u)
		return m, nil
	}
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return nil, fmt.Errorf("forward %s %s: %w: %w", q.Name, dns.TypeToString[q.Qtype], ErrNoUpstream, errors.Join(errs...))
}

// attempt is one question to one upstream: UDP, then TCP when the answer
// did not fit.
func (f *Forwarder) attempt(ctx context.Context, u *upstream, q dns.Question, do bool) (*dns.Msg, error) {
	req := new(dns.Msg)
	req.Id = dns.Id()
	req.RecursionDesired = true
	req.Question = []dns.Question{q}
	req.SetEdns0(f.opts.UDPSize, do)

	actx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	var m *dns.Msg
	var err error
	if f.opts.TCP {
		m, err = f.exchangeTCP(actx, u, req)
	} else {
		c := &dns.Client{Net: "udp", Timeout: f.opts.Timeout, UDPSize: f.opts.UDPSize}
		m, _, err = c.ExchangeContext(actx, req, u.addr)
		if err == nil && m.Truncated {
			c.Net = "tcp"
			m, _, err = c.ExchangeContext(actx, req, u.addr)
		}
	}
	if err != nil {
		return nil, err
	}
	if len(m.Question) != 1 || !strings.EqualFold(m.Question[0].Name, q.Name) ||
		m.Question[0].Qtype != q.Qtype || m.Question[0].Qclass != q.Qclass {
		return nil, errors.New("answer is for another question")
	}
	// The OPT record is per hop: the server adds its own for its client.
	extra := m.Extra[:0]
	for _, rr := range m.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	m.Extra = extra
	return m, nil
}

// exchangeTCP asks u over a kept-open connection, or a new one. A kept
// connection may have been closed by the server while idle (servers
// close idle ones after seconds, RFC 7766): that failure is retried once
// on a new connection before it counts against the upstream.
func (f *Forwarder) exchangeTCP(ctx context.Context, u *upstream, req *dns.Msg) (*dns.Msg, error) {
	deadline, _ := ctx.Deadline()
	for {
		conn := u.take()
		kept := conn != nil
		if !kept {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", u.addr)
			if err != nil {
				return nil, err
			}
			conn = &dns.Conn{Conn: c}
		}
		_ = conn.SetDeadline(deadline)
		err := conn.WriteMsg(req)
		var m *dns.Msg
		if err == nil {
			m, err = conn.ReadMsg()
		}
		if err == nil && m.Id != req.Id {
			err = errors.New("answer with another ID")
		}
		if err == nil {
			_ = conn.SetDeadline(time.Time{})
			u.keep(conn)
			return m, nil
		}
		conn.Close()
		if !kept || ctx.Err() != nil {
			return nil, err
		}
	}
}

func (f *Forwarder) succeeded(u *upstream) {
	u.fails.Store(0)
	if u.down.CompareAndSwap(true, false) {
		f.m.healthy.WithLabelValues(u.addr).Set(1)
		f.log.Info("upstream DNS server answers again", "upstream", u.addr)
	}
}

func (f *Forwarder) failed(u *upstream, err error) {
	if u.fails.Add(1) < int32(f.opts.FailThreshold) {
		return
	}
	if u.down.CompareAndSwap(false, true) {
		f.m.healthy.WithLabelValues(u.addr).Set(0)
		f.log.Warn("upstream DNS server marked down", "upstream", u.addr, "err", err)
	}
	if u.probing.CompareAndSwap(false, true) {
		f.wg.Add(1)
		go f.probe(u)
	}
}

// probe asks a down upstream for the root NS records until it answers
// (any answer: a server that says REFUSED is up, just unhelpful), so that
// traffic returns to the preferred upstream without waiting for a query
// to take the risk.
func (f *Forwarder) probe(u *upstream) {
	defer f.wg.Done()
	defer u.probing.Store(false)
	t := time.NewTicker(f.opts.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
		}
		if !u.down.Load() || u.removed.Load() {
			return // a real query found it up first, or it is gone
		}
		req := new(dns.Msg)
		req.SetQuestion(".", dns.TypeNS)
		c := &dns.Client{Net: "udp", Timeout: f.opts.Timeout}
		if f.opts.TCP {
			c.Net = "tcp"
		}
		ctx, cancel := context.WithTimeout(f.ctx, f.opts.Timeout)
		_, _, err := c.ExchangeContext(ctx, req, u.addr)
		cancel()
		if err == nil {
			f.succeeded(u)
			return
		}
		f.m.probeFailures.WithLabelValues(u.addr).Inc()
	}
}

// flight coalesces concurrent identical upstream queries.
type flight struct {
	mu sync.Mutex
	m  map[cacheKey]*call
}

type call struct {
	done chan struct{}
	msg  *dns.Msg
	err  error
}

func (g *flight) do(ctx context.Context, k cacheKey, fn func() (*dns.Msg, error)) (*dns.Msg, error) {
	g.mu.Lock()
	if c, ok := g.m[k]; ok {
		g.mu.Unlock()
		select {
		case <-c.done:
			return c.msg, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if g.m == nil {
		g.m = map[cacheKey]*call{}
	}
	c := &call{done: make(chan struct{})}
	g.m[k] = c
	g.mu.Unlock()

	c.msg, c.err = fn()
	g.mu.Lock()
	delete(g.m, k)
	g.mu.Unlock()
	close(c.done)
	return c.msg, c.err
}
