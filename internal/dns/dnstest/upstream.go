package dnstest

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Upstream is a fake recursive server on 127.0.0.1 (UDP and TCP on one
// random port). Tests give it records; everything else is NXDOMAIN with an
// SOA, so negative caching can be exercised.
type Upstream struct {
	Addr string

	mu      sync.Mutex
	records map[string][]dns.RR // key: lower-case name + "/" + type
	down    atomic.Bool
	// truncate makes UDP answers for these names come back empty with TC,
	// as a real server does when the answer does not fit.
	truncate map[string]bool
	queries  atomic.Int64
	tcp      atomic.Int64
	byName   sync.Map // name -> *atomic.Int64
}

// StartUpstream starts a fake upstream and stops it when the test ends.
func StartUpstream(t testing.TB) *Upstream {
	t.Helper()
	pc, ln, err := ListenPair("127.0.0.1")
	if err != nil {
		t.Fatalf("fake upstream: %v", err)
	}
	return StartUpstreamOn(t, pc, ln)
}

// StartUpstreamOn serves a fake upstream on the given sockets (which a
// test may have opened inside a network namespace of its own).
func StartUpstreamOn(t testing.TB, pc net.PacketConn, ln net.Listener) *Upstream {
	t.Helper()
	u := &Upstream{records: map[string][]dns.RR{}, truncate: map[string]bool{}}
	u.Addr = pc.LocalAddr().String()
	udp := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(u.serve("udp"))}
	tcp := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(u.serve("tcp"))}
	started := make(chan struct{}, 2)
	udp.NotifyStartedFunc = func() { started <- struct{}{} }
	tcp.NotifyStartedFunc = func() { started <- struct{}{} }
	go func() { _ = udp.ActivateAndServe() }()
	go func() { _ = tcp.ActivateAndServe() }()
	for range 2 {
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("fake upstream did not start")
		}
	}
	t.Cleanup(func() {
		_ = udp.Shutdown()
		_ = tcp.Shutdown()
	})
	return u
}

// ListenPair binds UDP and TCP on the same random port of host. It retries
// a few times because the port free for UDP may be taken for TCP.
func ListenPair(host string) (net.PacketConn, net.Listener, error) {
	var lastErr error
	for range 20 {
		pc, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, nil, err
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		lastErr = err
	}
	return nil, nil, fmt.Errorf("no port free for both UDP and TCP: %w", lastErr)
}

// Add puts records (in zone-file syntax) into the upstream.
func (u *Upstream) Add(t testing.TB, lines ...string) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, l := range lines {
		rr, err := dns.NewRR(l)
		if err != nil {
			t.Fatalf("fake upstream record %q: %v", l, err)
		}
		k := key(rr.Header().Name, rr.Header().Rrtype)
		u.records[k] = append(u.records[k], rr)
	}
}

// Truncate makes UDP answers for name come back truncated.
func (u *Upstream) Truncate(name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.truncate[strings.ToLower(dns.Fqdn(name))] = true
}

// SetDown makes the upstream drop every query (a dead server), or answer
// again.
func (u *Upstream) SetDown(down bool) { u.down.Store(down) }

// Queries is how many queries the upstream has answered or dropped.
func (u *Upstream) Queries() int64 { return u.queries.Load() }

// TCPQueries is how many of them came over TCP.
func (u *Upstream) TCPQueries() int64 { return u.tcp.Load() }

// QueriesFor is how many queries named name.
func (u *Upstream) QueriesFor(name string) int64 {
	if v, ok := u.byName.Load(strings.ToLower(dns.Fqdn(name))); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

func key(name string, t uint16) string {
	return strings.ToLower(dns.Fqdn(name)) + "/" + dns.TypeToString[t]
}

func (u *Upstream) serve(proto string) func(dns.ResponseWriter, *dns.Msg) {
	return func(w dns.ResponseWriter, r *dns.Msg) {
		u.queries.Add(1)
		if proto == "tcp" {
			u.tcp.Add(1)
		}
		if len(r.Question) != 1 {
			return
		}
		q := r.Question[0]
		name := strings.ToLower(q.Name)
		c, _ := u.byName.LoadOrStore(name, new(atomic.Int64))
		c.(*atomic.Int64).Add(1)
		if u.down.Load() {
			return // let the client time out
		}
		m := new(dns.Msg)
		m.SetReply(r)
		m.RecursionAvailable = true
		u.mu.Lock()
		answer := append([]dns.RR(nil), u.records[key(name, q.Qtype)]...)
		exists := len(answer) > 0
		if !exists {
			for k := range u.records {
				if strings.HasPrefix(k, name+"/") {
					exists = true
					break
				}
			}
		}
		trunc := u.truncate[name] && proto == "udp"
		u.mu.Unlock()
		switch {
		case trunc:
			m.Truncated = true
		case len(answer) > 0:
			m.Answer = answer
		default:
			if !exists {
				m.Rcode = dns.RcodeNameError
			}
			soa, _ := dns.NewRR("example. 60 IN SOA ns.example. hostmaster.example. 1 7200 1800 86400 30")
			m.Ns = []dns.RR{soa}
		}
		if o := r.IsEdns0(); o != nil {
			m.SetEdns0(o.UDPSize(), o.Do())
		}
		_ = w.WriteMsg(m)
	}
}
