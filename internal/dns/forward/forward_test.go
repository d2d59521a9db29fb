package forward

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/internal/freeport"
)

type clock struct{ t atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.t.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time          { return time.Unix(0, c.t.Load()) }
func (c *clock) advance(d time.Duration) { c.t.Add(int64(d)) }

func startForwarder(t *testing.T, o Options) *Forwarder {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Timeout == 0 {
		o.Timeout = 300 * time.Millisecond
	}
	f, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func ask(t *testing.T, f *Forwarder, name string, qtype uint16) *dns.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := f.Exchange(ctx, dns.Question{Name: name, Qtype: qtype, Qclass: dns.ClassINET}, false)
	if err != nil {
		t.Fatalf("Exchange(%s): %v", name, err)
	}
	return m
}

func TestCache(t *testing.T) {
	up := dnstest.StartUpstream(t)
	up.Add(t, "www.example.com. 60 IN A 192.0.2.1", "zero.example.com. 0 IN A 192.0.2.2", "mx.example.com. 60 IN MX 10 mail.example.com.")
	clk := newClock()
	f := startForwarder(t, Options{Upstreams: []string{up.Addr}, Now: clk.now})

	cases := []struct {
		name    string
		qname   string
		qtype   uint16
		advance time.Duration
		rcode   int
		ttl     uint32 // of the first record in answer, or of the SOA
		asked   int64  // upstream queries for qname so far (all types)
	}{
		{"first answer comes from upstream", "www.example.com.", dns.TypeA, 0, dns.RcodeSuccess, 60, 1},
		{"second from cache", "www.example.com.", dns.TypeA, 0, dns.RcodeSuccess, 60, 1},
		{"case does not matter", "WWW.Example.COM.", dns.TypeA, 0, dns.RcodeSuccess, 60, 1},
		{"TTL ages in the cache", "www.example.com.", dns.TypeA, 45 * time.Second, dns.RcodeSuccess, 15, 1},
		{"expired answer is asked again", "www.example.com.", dns.TypeA, 16 * time.Second, dns.RcodeSuccess, 60, 2},
		{"other type is another question", "www.example.com.", dns.TypeMX, 0, dns.RcodeSuccess, 0, 3},
		{"NODATA is cached", "www.example.com.", dns.TypeCAA, 0, dns.RcodeSuccess, 30, 4},
		// The SOA's TTL (60) is cut to its minimum (30) so that caches
		// downstream do not keep the denial longer than this one.
		{"NODATA ages", "www.example.com.", dns.TypeCAA, 29 * time.Second, dns.RcodeSuccess, 1, 4},
		{"NODATA expires", "www.example.com.", dns.TypeCAA, 2 * time.Second, dns.RcodeSuccess, 30, 5},
		{"NXDOMAIN from upstream", "gone.example.com.", dns.TypeA, 0, dns.RcodeNameError, 30, 1},
		{"NXDOMAIN cached", "gone.example.com.", dns.TypeA, 10 * time.Second, dns.RcodeNameError, 20, 1},
		{"NXDOMAIN expires", "gone.example.com.", dns.TypeA, 21 * time.Second, dns.RcodeNameError, 30, 2},
		{"TTL 0 is not cached", "zero.example.com.", dns.TypeA, 0, dns.RcodeSuccess, 0, 1},
		{"TTL 0 asked again", "zero.example.com.", dns.TypeA, 0, dns.RcodeSuccess, 0, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk.advance(tc.advance)
			m := ask(t, f, tc.qname, tc.qtype)
			if m.Rcode != tc.rcode {
				t.Errorf("rcode %s, want %s", dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.rcode])
			}
			var ttl uint32
			switch {
			case tc.ttl == 0:
			case len(m.Answer) > 0:
				ttl = m.Answer[0].Header().Ttl
			case len(m.Ns) > 0:
				ttl = m.Ns[0].Header().Ttl
			}
			if ttl != tc.ttl {
				t.Errorf("ttl %d, want %d (answer %v ns %v)", ttl, tc.ttl, m.Answer, m.Ns)
			}
			if got := up.QueriesFor(tc.qname); got != tc.asked {
				t.Errorf("upstream asked %d times, want %d", got, tc.asked)
			}
			for _, rr := range m.Extra {
				if rr.Header().Rrtype == dns.TypeOPT {
					t.Error("upstream OPT record leaked into the answer")
				}
			}
		})
	}
}

func TestCacheTTL(t *testing.T) {
	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	soa := rr("example. 600 IN SOA ns. h. 1 1 1 1 40")
	cases := []struct {
		name string
		m    dns.Msg
		want time.Duration
		ok   bool
	}{
		{"smallest answer TTL", dns.Msg{Answer: []dns.RR{rr("a. 50 IN A 1.1.1.1"), rr("a. 20 IN A 1.1.1.2")}}, 20 * time.Second, true},
		{"capped", dns.Msg{Answer: []dns.RR{rr("a. 86400 IN A 1.1.1.1")}}, time.Hour, true},
		{"TTL zero", dns.Msg{Answer: []dns.RR{rr("a. 0 IN A 1.1.1.1")}}, 0, false},
		{"NXDOMAIN uses SOA minimum", dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeNameError}, Ns: []dns.RR{soa}}, 40 * time.Second, true},
		{"NODATA uses SOA minimum", dns.Msg{Ns: []dns.RR{soa}}, 40 * time.Second, true},
		{"denial without SOA", dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeNameError}}, 0, false},
		{"SERVFAIL", dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeServerFailure}, Ns: []dns.RR{soa}}, 0, false},
		{"truncated", dns.Msg{MsgHdr: dns.MsgHdr{Truncated: true}, Answer: []dns.RR{rr("a. 50 IN A 1.1.1.1")}}, 0, false},
	}
	for _, tc := range cases {
		got, ok := cacheTTL(&tc.m, time.Hour, 5*time.Minute)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: cacheTTL = %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestTruncatedRetriesOverTCP(t *testing.T) {
	up := dnstest.StartUpstream(t)
	up.Add(t, "big.example.com. 60 IN TXT \"x\"")
	up.Truncate("big.example.com.")
	f := startForwarder(t, Options{Upstreams: []string{up.Addr}})
	m := ask(t, f, "big.example.com.", dns.TypeTXT)
	if len(m.Answer) != 1 || m.Truncated {
		t.Fatalf("answer %v truncated=%v, want the TCP answer", m.Answer, m.Truncated)
	}
	if up.TCPQueries() != 1 {
		t.Errorf("TCP queries = %d, want 1", up.TCPQueries())
	}
}

func TestFailover(t *testing.T) {
	bad := dnstest.StartUpstream(t)
	good := dnstest.StartUpstream(t)
	for _, u := range []*dnstest.Upstream{bad, good} {
		u.Add(t, "www.example.com. 60 IN A 192.0.2.1", "www2.example.com. 60 IN A 192.0.2.2", "www3.example.com. 60 IN A 192.0.2.3")
	}
	bad.SetDown(true)
	reg := prometheus.NewRegistry()
	f := startForwarder(t, Options{
		Upstreams: []string{bad.Addr, good.Addr}, CacheSize: -1, FailThreshold: 2,
		Timeout: 100 * time.Millisecond, ProbeInterval: 20 * time.Millisecond, Registerer: reg,
	})

	// Two failures mark the first upstream down; each query still gets
	// its answer from the second.
	for i := range 2 {
		if m := ask(t, f, "www.example.com.", dns.TypeA); len(m.Answer) != 1 {
			t.Fatalf("query %d: no answer from the healthy upstream", i)
		}
	}
	if f.Healthy() != 1 {
		t.Fatalf("Healthy() = %d after two failures, want 1", f.Healthy())
	}
	if v := testutil.ToFloat64(f.m.healthy.WithLabelValues(bad.Addr)); v != 0 {
		t.Errorf("health gauge of the dead upstream = %v", v)
	}
	// A down upstream is skipped: the question goes straight to the other.
	ask(t, f, "www2.example.com.", dns.TypeA)
	if bad.QueriesFor("www2.example.com.") != 0 {
		t.Error("down upstream was asked")
	}

	// Back up: the probe notices and traffic returns to the first.
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(f.m.probeFailures.WithLabelValues(bad.Addr)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no failed probe of the down upstream after 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	bad.SetDown(false)
	for f.Healthy() != 2 {
		if time.Now().After(deadline) {
			t.Fatal("recovered upstream still marked down after 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ask(t, f, "www3.example.com.", dns.TypeA)
	if bad.QueriesFor("www3.example.com.") != 1 || good.QueriesFor("www3.example.com.") != 0 {
		t.Error("traffic did not return to the preferred upstream")
	}
	if n := testutil.CollectAndCount(reg, "svcnet_dns_forward_upstream_healthy"); n != 2 {
		t.Errorf("health gauge series = %d, want 2", n)
	}
}

func TestAllUpstreamsDown(t *testing.T) {
	up := dnstest.StartUpstream(t)
	up.SetDown(true)
	f := startForwarder(t, Options{Upstreams: []string{up.Addr}, Timeout: 50 * time.Millisecond})
	for range 3 { // also once marked down: it is still tried, being the only one
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := f.Exchange(ctx, dns.Question{Name: "www.example.com.", Qtype: dns.TypeA, Qclass: dns.ClassINET}, false)
		cancel()
		if !errors.Is(err, ErrNoUpstream) {
			t.Fatalf("err = %v, want ErrNoUpstream", err)
		}
	}
}

func TestConcurrentMissesShareOneQuery(t *testing.T) {
	up := dnstest.StartUpstream(t)
	up.Add(t, "www.example.com. 60 IN A 192.0.2.1")
	f := startForwarder(t, Options{Upstreams: []string{up.Addr}})
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := f.Exchange(context.Background(), dns.Question{Name: "www.example.com.", Qtype: dns.TypeA, Qclass: dns.ClassINET}, false)
			if err != nil || len(m.Answer) != 1 {
				t.Errorf("Exchange: %v %v", m, err)
				return
			}
			m.Answer[0].Header().Ttl = 1 // callers own their copy
		}()
	}
	wg.Wait()
	if n := up.QueriesFor("www.example.com."); n < 1 || n > 2 {
		t.Errorf("upstream asked %d times for one name", n)
	}
	if m := ask(t, f, "www.example.com.", dns.TypeA); m.Answer[0].Header().Ttl < 50 {
		t.Error("a caller's change reached the cache")
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("no upstreams accepted")
	}
	if _, err := New(Options{Upstreams: []string{"127.0.0.1"}}); err == nil {
		t.Error("upstream without port accepted")
	}
	reg := prometheus.NewRegistry()
	f, err := New(Options{Upstreams: []string{"127.0.0.1:9"}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := New(Options{Upstreams: []string{"127.0.0.1:9"}, Registerer: reg}); err == nil {
		t.Error("second forwarder on one registry: want a registration error")
	}
}

// TestCached: the server's no-wait path sees only what Exchange put in
// the cache, and learns when that answer next changes.
func TestCached(t *testing.T) {
	up := dnstest.StartUpstream(t)
	up.Add(t, "www.example.com. 3 IN A 192.0.2.1")
	clk := newClock()
	f := startForwarder(t, Options{Upstreams: []string{up.Addr}, Now: clk.now})
	q := dns.Question{Name: "WWW.example.com.", Qtype: dns.TypeA, Qclass: dns.ClassINET}
	if _, _, ok := f.Cached(q, false); ok {
		t.Fatal("hit before anything was asked")
	}
	ask(t, f, "www.example.com.", dns.TypeA)
	stored := clk.now()
	cases := []struct {
		after     time.Duration
		ok        bool
		ttl       uint32
		untilFrom time.Duration // until - stored
	}{
		{0, true, 3, time.Second},
		{1500 * time.Millisecond, true, 2, 2 * time.Second},
		{2999 * time.Millisecond, true, 1, 3 * time.Second}, // the expiry, not a fourth second
		{3 * time.Second, false, 0, 0},
	}
	for _, tc := range cases {
		clk.t.Store(stored.Add(tc.after).UnixNano())
		m, until, ok := f.Cached(q, false)
		if ok != tc.ok {
			t.Fatalf("after %s: hit = %v, want %v", tc.after, ok, tc.ok)
		}
		if !ok {
			continue
		}
		if ttl := m.Answer[0].Header().Ttl; ttl != tc.ttl {
			t.Errorf("after %s: TTL %d, want %d", tc.after, ttl, tc.ttl)
		}
		if got := until.Sub(stored); got != tc.untilFrom {
			t.Errorf("after %s: until stored+%s, want stored+%s", tc.after, got, tc.untilFrom)
		}
	}
	if _, _, ok := f.Cached(dns.Question{Name: "www.example.com.", Qtype: dns.TypeA, Qclass: dns.ClassINET}, true); ok {
		t.Error("a DO question hit the answer to a question without DO")
	}
}

// countingListener counts the connections a fake upstream accepts.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

func startCounted(t *testing.T) (*dnstest.Upstream, *countingListener) {
	t.Helper()
	pc, ln, err := dnstest.ListenPair("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	return dnstest.StartUpstreamOn(t, pc, cl), cl
}

func TestTCP(t *testing.T) {
	t.Run("every question over one kept connection", func(t *testing.T) {
		up, conns := startCounted(t)
		up.Add(t, "www.example.com. 60 IN A 192.0.2.1")
		f := startForwarder(t, Options{Upstreams: []string{up.Addr}, TCP: true, CacheSize: -1})
		for range 5 {
			if m := ask(t, f, "www.example.com.", dns.TypeA); len(m.Answer) != 1 {
				t.Fatalf("answer %v", m.Answer)
			}
		}
		if up.TCPQueries() != 5 || up.Queries() != 5 {
			t.Errorf("%d queries, %d over TCP; want 5 over TCP", up.Queries(), up.TCPQueries())
		}
		if n := conns.n.Load(); n != 1 {
			t.Errorf("%d connections for 5 questions, want 1", n)
		}
	})
	t.Run("a kept connection the server closed is replaced, not a failure", func(t *testing.T) {
		up, conns := startCounted(t)
		up.Add(t, "www.example.com. 60 IN A 192.0.2.1")
		f := startForwarder(t, Options{Upstreams: []string{up.Addr}, TCP: true, CacheSize: -1})
		u := (*f.upstreams.Load())[0]
		ours, theirs := net.Pipe()
		theirs.Close()
		u.keep(&dns.Conn{Conn: ours})
		if m := ask(t, f, "www.example.com.", dns.TypeA); len(m.Answer) != 1 {
			t.Fatalf("answer %v", m.Answer)
		}
		if u.fails.Load() != 0 || conns.n.Load() != 1 {
			t.Errorf("fails %d, connections %d; want 0 and 1", u.fails.Load(), conns.n.Load())
		}
	})
	t.Run("a dead replica refuses: the other answers, and questions spread", func(t *testing.T) {
		a, b := dnstest.StartUpstream(t), dnstest.StartUpstream(t)
		for _, u := range []*dnstest.Upstream{a, b} {
			u.Add(t, "www.example.com. 60 IN A 192.0.2.1")
		}
		f := startForwarder(t, Options{Upstreams: []string{a.Addr, b.Addr}, TCP: true, Spread: true, CacheSize: -1})
		for range 10 {
			ask(t, f, "www.example.com.", dns.TypeA)
		}
		if a.Queries() != 5 || b.Queries() != 5 {
			t.Errorf("replicas asked %d and %d times, want 5 each", a.Queries(), b.Queries())
		}
		dead := freeport.Addr(t)
		if err := f.SetUpstreams([]string{dead, b.Addr}); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if m := ask(t, f, "www.example.com.", dns.TypeA); len(m.Answer) != 1 {
				t.Fatalf("question %d: answer %v", i, m.Answer)
			}
		}
		if b.Queries() != 15 {
			t.Errorf("the live replica answered %d, want all 10 new questions", b.Queries()-5)
		}
	})
}

func TestSetUpstreams(t *testing.T) {
	a, b := dnstest.StartUpstream(t), dnstest.StartUpstream(t)
	for _, u := range []*dnstest.Upstream{a, b} {
		u.Add(t, "www.example.com. 60 IN A 192.0.2.1")
	}
	reg := prometheus.NewRegistry()
	f := startForwarder(t, Options{Upstreams: []string{a.Addr}, TCP: true, CacheSize: -1, Registerer: reg})
	ask(t, f, "www.example.com.", dns.TypeA)
	old := (*f.upstreams.Load())[0]

	if err := f.SetUpstreams(nil); err == nil {
		t.Error("SetUpstreams(nil) accepted: questions would have nowhere to go")
	}
	if err := f.SetUpstreams([]string{"no-port"}); err == nil {
		t.Error("an address without a port accepted")
	}
	if err := f.SetUpstreams([]string{b.Addr}); err != nil {
		t.Fatal(err)
	}
	ask(t, f, "www.example.com.", dns.TypeA)
	if a.Queries() != 1 || b.Queries() != 1 {
		t.Errorf("old upstream asked %d times, new %d; want 1 and 1", a.Queries(), b.Queries())
	}
	if !old.removed.Load() || len(old.idle) != 0 {
		t.Errorf("the removed upstream keeps %d connections", len(old.idle))
	}
	if got := f.Upstreams(); len(got) != 1 || got[0] != b.Addr {
		t.Errorf("Upstreams() = %v", got)
	}
	// The removed upstream's series go with it.
	if n := testutil.CollectAndCount(reg, "svcnet_dns_forward_upstream_healthy"); n != 1 {
		t.Errorf("health gauge series = %d, want 1", n)
	}
	if n := testutil.CollectAndCount(reg, "svcnet_dns_forward_requests_total"); n != 1 {
		t.Errorf("request counter series = %d, want 1", n)
	}
}
