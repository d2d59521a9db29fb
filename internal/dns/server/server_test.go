package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/internal/dns/forward"
	"github.com/svcnet/svcnet/internal/dns/index"
	"github.com/svcnet/svcnet/internal/dns/resolver"
	"github.com/svcnet/svcnet/internal/syncbuf"
)

var quiet = slog.New(slog.DiscardHandler)

// fixture is the shared snapshot plus what only a server test needs: a
// pod at 127.0.0.1 (the address test queries come from, for autopath) and
// a headless Service too big for a 512-byte UDP answer.
func fixture() dnstest.Cluster {
	c := dnstest.Fixture()
	c.Pods = append(c.Pods, dnstest.Pod("default", "loopback-client", "127.0.0.1"))
	var eps []dnstest.Endpoint
	for i := range 40 {
		eps = append(eps, dnstest.Endpoint{IP: fmt.Sprintf("10.244.7.%d", i+1)})
	}
	c.Services = append(c.Services, dnstest.Headless("default", "big", false))
	c.Slices = append(c.Slices, dnstest.Slice("default", "big", "big-a", discoveryv1.AddressTypeIPv4, nil, eps...))
	return c
}

func buildIndex(c dnstest.Cluster) *index.Index {
	return index.Build(index.Options{
		Pods:         index.PodsVerified,
		ReverseCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("10.244.0.0/16")},
	}, c.Services, c.Slices, c.Pods)
}

// start runs a server on 127.0.0.1 with a random port until the test ends.
func start(t *testing.T, opts Options, idx *index.Index) *Server {
	t.Helper()
	return startAt(t, "127.0.0.1:0", opts, idx)
}

// startAt is start listening on addr.
func startAt(t *testing.T, addr string, opts Options, idx *index.Index) *Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(addr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("server did not stop within 10s")
		}
	})
	if idx != nil {
		s.SetIndex(idx, time.Time{})
	}
	return s
}

// needIPv6Loopback skips the test where ::1 cannot be listened on.
func needIPv6Loopback(t *testing.T) {
	t.Helper()
	c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	c.Close()
}

func upstreamWith(t *testing.T, up *dnstest.Upstream) *forward.Forwarder {
	t.Helper()
	f, err := forward.New(forward.Options{Upstreams: []string{up.Addr}, Timeout: 300 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func exchange(t *testing.T, addr, network string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 3 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s query %v: %v", network, m.Question, err)
	}
	if r.Id != m.Id {
		t.Fatalf("reply ID %d for query %d", r.Id, m.Id)
	}
	return r
}

func question(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

func rrs(rr []dns.RR) []string {
	out := make([]string, 0, len(rr))
	for _, r := range rr {
		if r.Header().Rrtype == dns.TypeOPT {
			continue
		}
		out = append(out, strings.Join(strings.Fields(r.String()), " "))
	}
	return out
}

// TestRecords asks one question per record type over UDP and TCP with a
// real client; resolver_test covers the edge cases of each type.
func TestRecords(t *testing.T) {
	up := dnstest.StartUpstream(t)
	up.Add(t, "hostnames.example.com. 300 IN A 192.0.2.53", "www.example.org. 300 IN A 192.0.2.80")
	s := start(t, Options{Upstream: upstreamWith(t, up)}, buildIndex(fixture()))

	cases := []struct {
		name   string
		qname  string
		qtype  uint16
		rcode  int
		answer []string
		aa     bool
	}{
		{"ClusterIP A", "kubernetes.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess,
			[]string{"kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"}, true},
		{"ClusterIP AAAA", "dual.default.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess,
			[]string{"dual.default.svc.cluster.local. 5 IN AAAA fd00::30"}, true},
		{"headless A", "web.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{
			"web.default.svc.cluster.local. 5 IN A 10.244.0.1",
			"web.default.svc.cluster.local. 5 IN A 10.244.0.2",
			"web.default.svc.cluster.local. 5 IN A 10.244.0.4"}, true},
		{"headless hostname", "web-0.web.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess,
			[]string{"web-0.web.default.svc.cluster.local. 5 IN A 10.244.0.1"}, true},
		{"SRV", "_https._tcp.kubernetes.default.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"_https._tcp.kubernetes.default.svc.cluster.local. 5 IN SRV 0 100 443 kubernetes.default.svc.cluster.local."}, true},
		{"PTR", "1.0.96.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess,
			[]string{"1.0.96.10.in-addr.arpa. 5 IN PTR kubernetes.default.svc.cluster.local."}, true},
		{"ExternalName chased upstream", "ext.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{
			"ext.default.svc.cluster.local. 5 IN CNAME hostnames.example.com.",
			"hostnames.example.com. 300 IN A 192.0.2.53"}, false},
		{"ExternalName inside the zone", "ext-internal.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{
			"ext-internal.default.svc.cluster.local. 5 IN CNAME kubernetes.default.svc.cluster.local.",
			"kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"}, true},
		{"pod", "10-244-5-5.default.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess,
			[]string{"10-244-5-5.default.pod.cluster.local. 5 IN A 10.244.5.5"}, true},
		{"schema version", "dns-version.cluster.local.", dns.TypeTXT, dns.RcodeSuccess,
			[]string{`dns-version.cluster.local. 5 IN TXT "1.1.0"`}, true},
		{"NODATA", "kubernetes.default.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, []string{}, true},
		{"NXDOMAIN", "nope.default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, []string{}, true},
		{"outside name", "www.example.org.", dns.TypeA, dns.RcodeSuccess,
			[]string{"www.example.org. 300 IN A 192.0.2.80"}, false},
		{"outside NXDOMAIN", "nope.example.org.", dns.TypeA, dns.RcodeNameError, []string{}, false},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				r := exchange(t, s.Addr(), network, question(tc.qname, tc.qtype))
				if r.Rcode != tc.rcode {
					t.Errorf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode])
				}
				if got := rrs(r.Answer); !slices.Equal(got, tc.answer) {
					t.Errorf("answer\n got %q\nwant %q", got, tc.answer)
				}
				if r.Authoritative != tc.aa {
					t.Errorf("AA = %v, want %v", r.Authoritative, tc.aa)
				}
				if !r.RecursionAvailable {
					t.Error("RA not set")
				}
				if len(tc.answer) == 0 && tc.aa && (len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA) {
					t.Errorf("negative answer without the zone SOA: %v", r.Ns)
				}
			})
		}
	}
}

func TestTruncation(t *testing.T) {
	s := start(t, Options{}, buildIndex(fixture()))
	const big = "big.default.svc.cluster.local."

	r := exchange(t, s.Addr(), "udp", question(big, dns.TypeA))
	r.Compress = true // as sent
	if !r.Truncated || r.Len() > dns.MinMsgSize {
		t.Errorf("no EDNS: TC=%v size=%d, want TC and at most 512 bytes", r.Truncated, r.Len())
	}

	m := question(big, dns.TypeA)
	m.SetEdns0(1232, false)
	r = exchange(t, s.Addr(), "udp", m)
	if r.Truncated || len(r.Answer) != 40 || r.IsEdns0() == nil {
		t.Errorf("EDNS 1232: TC=%v answers=%d OPT=%v, want all 40 and an OPT", r.Truncated, len(r.Answer), r.IsEdns0())
	}

	r = exchange(t, s.Addr(), "tcp", question(big, dns.TypeA))
	if r.Truncated || len(r.Answer) != 40 {
		t.Errorf("TCP: TC=%v answers=%d, want all 40", r.Truncated, len(r.Answer))
	}
}

func TestFit(t *testing.T) {
	m := new(dns.Msg)
	m.SetQuestion("x.", dns.TypeSRV)
	for i := range 40 {
		rr, _ := dns.NewRR(fmt.Sprintf("x. 5 IN SRV 0 10 80 t%d.example.", i))
		m.Answer = append(m.Answer, rr)
		a, _ := dns.NewRR(fmt.Sprintf("t%d.example. 5 IN A 10.0.0.%d", i, i))
		m.Extra = append(m.Extra, a)
	}
	size := m.Copy()
	size.Extra = nil
	limit := size.Len() + 20
	if fit(m, limit) {
		t.Error("TC set although only additional records had to go")
	}
	if len(m.Answer) != 40 || len(m.Extra) != 0 {
		t.Errorf("answers %d extra %d, want 40 and 0", len(m.Answer), len(m.Extra))
	}
	if !fit(m, 512) || m.Len() > 512 || len(m.Answer) == 40 {
		t.Error("answer that cannot fit: want TC")
	}
}

func TestNotSyncedThenSwapped(t *testing.T) {
	up := dnstest.StartUpstream(t)
	up.Add(t, "www.example.org. 300 IN A 192.0.2.80")
	reg := prometheus.NewRegistry()
	s := start(t, Options{Upstream: upstreamWith(t, up), Registerer: reg}, nil)

	const name = "late.default.svc.cluster.local."
	if r := exchange(t, s.Addr(), "udp", question(name, dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("before sync: %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	if s.Ready() {
		t.Error("ready before sync")
	}
	if r := exchange(t, s.Addr(), "udp", question("www.example.org.", dns.TypeA)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("outside names must work before sync: %v", r)
	}

	c := fixture()
	s.SetIndex(buildIndex(c), time.Now().Add(-20*time.Millisecond))
	if r := exchange(t, s.Addr(), "udp", question(name, dns.TypeA)); r.Rcode != dns.RcodeNameError {
		t.Errorf("synced, no such service: %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
	}
	c.Services = append(c.Services, dnstest.Service("default", "late", []string{"10.96.9.9"}))
	s.SetIndex(buildIndex(c), time.Now())
	// No cache in front of the zone: the very next query sees the change.
	if r := exchange(t, s.Addr(), "udp", question(name, dns.TypeA)); len(r.Answer) != 1 {
		t.Errorf("after swap: %v, want the new service", r.Answer)
	}
	if !s.Ready() {
		t.Error("not ready after sync")
	}
	if n := testutil.CollectAndCount(reg, "svcnet_dns_programming_duration_seconds"); n != 1 {
		t.Errorf("programming latency histogram series = %d", n)
	}
	if v := testutil.ToFloat64(s.m.updates); v != 2 {
		t.Errorf("zone updates = %v, want 2", v)
	}
}

func TestClusterNamesSurviveUpstreamOutage(t *testing.T) {
	up := dnstest.StartUpstream(t)
	up.SetDown(true)
	s := start(t, Options{Upstream: upstreamWith(t, up), ForwardTimeout: time.Second}, buildIndex(fixture()))
	for range 3 {
		before := up.Queries()
		for _, n := range []string{"kubernetes.default.svc.cluster.local.", "nope.default.svc.cluster.local.", "1.0.96.10.in-addr.arpa."} {
			r := exchange(t, s.Addr(), "udp", question(n, dns.TypeA))
			if r.Rcode == dns.RcodeServerFailure {
				t.Fatalf("cluster name %s with upstream down: SERVFAIL", n)
			}
		}
		if up.Queries() != before {
			t.Error("a cluster name reached the upstream")
		}
		r := exchange(t, s.Addr(), "udp", question("www.example.org.", dns.TypeA))
		if r.Rcode != dns.RcodeServerFailure {
			t.Errorf("outside name with upstream down: %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
		}
	}
	// ExternalName: the CNAME still comes back, without the target's data.
	r := exchange(t, s.Addr(), "udp", question("ext.default.svc.cluster.local.", dns.TypeA))
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeCNAME {
		t.Errorf("ExternalName with upstream down: %v", r)
	}
}

func TestAutopath(t *testing.T) {
	up := dnstest.StartUpstream(t)
	up.Add(t, "google.com. 300 IN A 192.0.2.1")
	reg := prometheus.NewRegistry()
	s := start(t, Options{
		Upstream:   upstreamWith(t, up),
		Resolver:   resolver.Config{Autopath: true, HostSearch: []string{"corp.example"}},
		Registerer: reg,
	}, buildIndex(fixture()))

	// Test queries come from 127.0.0.1, a pod in "default" in the fixture.
	r := exchange(t, s.Addr(), "udp", question("google.com.default.svc.cluster.local.", dns.TypeA))
	want := []string{
		"google.com.default.svc.cluster.local. 5 IN CNAME google.com.",
		"google.com. 300 IN A 192.0.2.1",
	}
	if got := rrs(r.Answer); r.Rcode != dns.RcodeSuccess || !slices.Equal(got, want) {
		t.Errorf("autopath: %s %q, want %q", dns.RcodeToString[r.Rcode], got, want)
	}
	if up.QueriesFor("google.com.corp.example.") != 1 {
		t.Error("host search domain not tried before the bare name")
	}
	r = exchange(t, s.Addr(), "udp", question("db.other.default.svc.cluster.local.", dns.TypeA))
	if len(r.Answer) != 2 {
		t.Errorf("autopath to a cluster name: %v", r.Answer)
	}
	r = exchange(t, s.Addr(), "udp", question("nothing.example.default.svc.cluster.local.", dns.TypeA))
	if r.Rcode != dns.RcodeNameError || len(r.Answer) != 0 {
		t.Errorf("autopath with no answer anywhere: %v, want the plain NXDOMAIN", r)
	}
	// A cluster name written out without the final dot: the walk passes
	// the node's search domain upstream and ends in the zone.
	r = exchange(t, s.Addr(), "udp", question("kubernetes.default.svc.cluster.local.default.svc.cluster.local.", dns.TypeA))
	if len(r.Answer) != 2 || r.Rcode != dns.RcodeSuccess {
		t.Errorf("autopath back into the zone: %v", r)
	}
	if v := testutil.ToFloat64(s.m.autopath); v != 3 {
		t.Errorf("autopath successes = %v, want 3", v)
	}
}

// TestBadInput sends what a DNS server meets on the Internet and checks
// each gets the right answer, or none, and that the server keeps serving.
func TestBadInput(t *testing.T) {
	s := start(t, Options{}, buildIndex(fixture()))
	conn, err := net.Dial("udp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw := func(b []byte) *dns.Msg {
		t.Helper()
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		buf := make([]byte, 65535)
		n, err := conn.Read(buf)
		if err != nil {
			return nil
		}
		m := new(dns.Msg)
		if err := m.Unpack(buf[:n]); err != nil {
			t.Fatalf("server sent something unparsable: %v", err)
		}
		return m
	}
	pack := func(m *dns.Msg) []byte {
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	if m := raw([]byte{1, 2, 3}); m != nil {
		t.Errorf("short packet answered: %v", m)
	}
	resp := question("kubernetes.default.svc.cluster.local.", dns.TypeA)
	resp.Response = true
	if m := raw(pack(resp)); m != nil {
		t.Errorf("response answered (reflection loop): %v", m)
	}
	// A header announcing a question that is not there.
	if m := raw([]byte{0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}); m == nil || m.Rcode != dns.RcodeFormatError || m.Id != 0xabcd {
		t.Errorf("truncated question: %v, want FORMERR with ID abcd", m)
	}
	// A compression pointer pointing at itself.
	if m := raw([]byte{0, 7, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1}); m == nil || m.Rcode != dns.RcodeFormatError {
		t.Errorf("pointer loop: %v, want FORMERR", m)
	}
	// A name longer than 255 octets.
	long := []byte{0, 8, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	for range 5 {
		long = append(long, 63)
		long = append(long, bytes.Repeat([]byte{'a'}, 63)...)
	}
	long = append(long, 0, 0, 1, 0, 1)
	if m := raw(long); m == nil || m.Rcode != dns.RcodeFormatError {
		t.Errorf("oversized name: %v, want FORMERR", m)
	}

	edit := func(f func(m *dns.Msg)) []byte {
		m := question("kubernetes.default.svc.cluster.local.", dns.TypeA)
		f(m)
		return pack(m)
	}
	cases := []struct {
		name  string
		pkt   []byte
		rcode int
	}{
		{"NOTIFY", edit(func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }), dns.RcodeNotImplemented},
		{"UPDATE", edit(func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate }), dns.RcodeNotImplemented},
		{"AXFR", edit(func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeAXFR }), dns.RcodeRefused},
		{"IXFR", edit(func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeIXFR }), dns.RcodeRefused},
		{"CHAOS", edit(func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }), dns.RcodeRefused},
		{"unknown class", edit(func(m *dns.Msg) { m.Question[0].Qclass = 1234 }), dns.RcodeRefused},
		{"two questions", edit(func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) }), dns.RcodeFormatError},
		{"EDNS version 1", edit(func(m *dns.Msg) { m.SetEdns0(1232, false); m.IsEdns0().SetVersion(1) }), dns.RcodeBadVers},
		{"two OPT records", edit(func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.Extra = append(m.Extra, m.Extra[0])
		}), dns.RcodeFormatError},
		{"outside name without upstream", edit(func(m *dns.Msg) { m.Question[0].Name = "example.com." }), dns.RcodeRefused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := raw(tc.pkt)
			if m == nil || m.Rcode != tc.rcode {
				t.Fatalf("got %v, want %s", m, dns.RcodeToString[tc.rcode])
			}
		})
	}
	// AXFR arrives over TCP in practice.
	r := exchange(t, s.Addr(), "tcp", question("cluster.local.", dns.TypeAXFR))
	if r.Rcode != dns.RcodeRefused {
		t.Errorf("AXFR over TCP: %s", dns.RcodeToString[r.Rcode])
	}
	if r := exchange(t, s.Addr(), "udp", question("kubernetes.default.svc.cluster.local.", dns.TypeA)); len(r.Answer) != 1 {
		t.Error("server stopped answering after bad input")
	}
}

func TestTCPPipelining(t *testing.T) {
	s := start(t, Options{}, buildIndex(fixture()))
	co, err := dns.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	_ = co.SetDeadline(time.Now().Add(5 * time.Second))
	names := []string{"kubernetes.default.svc.cluster.local.", "db.other.svc.cluster.local.", "web.default.svc.cluster.local."}
	for i, n := range names {
		m := question(n, dns.TypeA)
		m.Id = uint16(100 + i)
		if err := co.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range names {
		r, err := co.ReadMsg()
		if err != nil {
			t.Fatal(err)
		}
		if r.Id != uint16(100+i) || len(r.Answer) == 0 {
			t.Errorf("reply %d: id %d answers %d", i, r.Id, len(r.Answer))
		}
	}
}

func TestMetricsAndQueryLog(t *testing.T) {
	reg := prometheus.NewRegistry()
	var logs syncbuf.Buffer
	s := start(t, Options{Registerer: reg, QueryLog: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, buildIndex(fixture()))
	exchange(t, s.Addr(), "udp", question("kubernetes.default.svc.cluster.local.", dns.TypeA))
	exchange(t, s.Addr(), "tcp", question("nope.default.svc.cluster.local.", dns.TypeAAAA))
	exchange(t, s.Addr(), "udp", question("kubernetes.default.svc.cluster.local.", 4242))

	checks := []struct {
		c    prometheus.Collector
		want float64
	}{
		{s.m.responses.WithLabelValues("A", "NOERROR", "zone"), 1},
		{s.m.responses.WithLabelValues("AAAA", "NXDOMAIN", "zone"), 1},
		{s.m.responses.WithLabelValues("other", "NOERROR", "zone"), 1},
		{s.m.requests.WithLabelValues("tcp", "AAAA"), 1},
		{s.m.requests.WithLabelValues("udp", "A"), 1},
	}
	for i, c := range checks {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("check %d: %v, want %v", i, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(reg, "svcnet_dns_request_duration_seconds"); n != 1 {
		t.Errorf("duration series = %d, want 1 (source zone)", n)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP svcnet_dns_zone_synced 1 once the zone is served from synced informers.
# TYPE svcnet_dns_zone_synced gauge
svcnet_dns_zone_synced 1
`), "svcnet_dns_zone_synced"); err != nil {
		t.Error(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(logs.String(), "name=nope.default.svc.cluster.local.") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if l := logs.String(); !strings.Contains(l, "rcode=NXDOMAIN") || !strings.Contains(l, "proto=tcp") {
		t.Errorf("query log:\n%s", l)
	}
}

// TestListen covers the port-0 path both listeners must share.
func TestListen(t *testing.T) {
	s, err := New(Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(context.Background()); err == nil {
		t.Error("Serve before Listen succeeded")
	}
	if err := s.Listen("nonsense"); err == nil {
		t.Error("bad address accepted")
	}
	s2 := start(t, Options{}, nil)
	_, port, _ := net.SplitHostPort(s2.Addr())
	if port == "0" || port == "" {
		t.Errorf("Addr() = %q", s2.Addr())
	}
	// The UDP sockets share their port (SO_REUSEPORT), but no second
	// group may join them, not even one of the same user with
	// SO_REUSEPORT on every socket: the queries would be split with it.
	ua, err := net.ResolveUDPAddr("udp", s2.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if g, err := ListenUDPGroup(ua, 2); err == nil {
		closeAll(g)
		t.Errorf("a second UDP group bound %s", s2.Addr())
	}
	// Nor a second server (whose TCP bind would fail too).
	s3, err := New(Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.Listen(s2.Addr()); err == nil {
		closeAll(s3.udp)
		s3.tcp.Close()
		t.Errorf("a second server listened on %s", s2.Addr())
	}
	if _, err := New(Options{Registerer: prometheus.NewRegistry()}); err != nil {
		t.Error(err)
	}
}

// TestReuseportGroup checks that every socket of the UDP group is served:
// 64 clients, each from a port of its own, land on all four sockets (the
// chance that one socket gets none of them is under 1e-7), and each must
// get its answer.
func TestReuseportGroup(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	s := start(t, Options{}, buildIndex(fixture()))
	if len(s.udp) != 4 {
		t.Fatalf("%d UDP sockets for GOMAXPROCS 4", len(s.udp))
	}
	for _, c := range s.udp {
		if c.LocalAddr().String() != s.Addr() {
			t.Fatalf("socket on %s, server on %s", c.LocalAddr(), s.Addr())
		}
	}
	for i := range 64 {
		r := exchange(t, s.Addr(), "udp", question("kubernetes.default.svc.cluster.local.", dns.TypeA))
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("client %d: %v", i, r)
		}
	}
}

// TestUDPGroupSpreads checks that the kernel spreads clients over the
// group's sockets (the first joins the group only after its bind): 64
// clients from ports of their own must reach more than one of 4 sockets
// (all on one has a chance of 4^-63).
func TestUDPGroupSpreads(t *testing.T) {
	group, err := ListenUDPGroup(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(group)
	for range 64 {
		c, err := net.DialUDP("udp", nil, group[0].LocalAddr().(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	reached, total := 0, 0
	buf := make([]byte, 16)
	for _, c := range group {
		n := 0
		for {
			_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			if _, _, err := c.ReadFromUDP(buf); err != nil {
				break
			}
			n++
		}
		if n > 0 {
			reached++
		}
		total += n
	}
	if total != 64 || reached < 2 {
		t.Errorf("%d datagrams reached %d of 4 sockets", total, reached)
	}
}

// TestSockaddr round-trips the addresses recvmmsg and sendmmsg carry.
func TestSockaddr(t *testing.T) {
	for _, ap := range []string{"127.0.0.1:53", "10.244.1.7:40000", "[::1]:53", "[fd00::30]:65535", "[::ffff:10.0.0.1]:1"} {
		t.Run(ap, func(t *testing.T) {
			want := netip.MustParseAddrPort(ap)
			var sa unix.RawSockaddrInet6
			putSockaddr(&sa, want)
			if got := sockaddrPort(&sa); got != want {
				t.Errorf("round trip: %v", got)
			}
		})
	}
	if got := sockaddrPort(&unix.RawSockaddrInet6{Family: unix.AF_UNIX}); got.IsValid() {
		t.Errorf("AF_UNIX read as %v", got)
	}
}

// TestIPv6Loopback answers a client over IPv6, UDP and TCP.
func TestIPv6Loopback(t *testing.T) {
	needIPv6Loopback(t)
	s := startAt(t, "[::1]:0", Options{}, buildIndex(fixture()))
	for _, network := range []string{"udp", "tcp"} {
		r := exchange(t, s.Addr(), network, question("kubernetes.default.svc.cluster.local.", dns.TypeA))
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Errorf("%s: %v", network, r)
		}
	}
}

// TestUDPPathAllocates checks that a repeated question costs the read
// loop no allocation at all — read, memo, write — so that load does not
// wake the garbage collector (whose pauses were the latency tail).
func TestUDPPathAllocates(t *testing.T) {
	s, err := New(Options{Logger: quiet, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	s.SetIndex(buildIndex(fixture()), time.Time{})
	group, err := ListenUDPGroup(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(group)
	io, err := newBatchIO(group[0], batchSize, maxUDPQuery, 0)
	if err != nil {
		t.Fatal(err)
	}
	client, err := net.DialUDP("udp", nil, group[0].LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	m := question("kubernetes.default.svc.cluster.local.", dns.TypeA)
	m.SetEdns0(1232, false)
	q, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]outMsg, 1)
	resp, reply := make([]byte, 4096), make([]byte, 4096)
	var key []byte
	var failed error
	round := func() {
		if _, err := client.Write(q); err != nil {
			failed = err
			return
		}
		n, err := io.read()
		if err != nil || n != 1 {
			failed = fmt.Errorf("read %d: %v", n, err)
			return
		}
		raw, from, _ := io.msg(0)
		b, later := s.answerUDP(context.Background(), raw, from, resp, &key)
		if later != nil || b == nil {
			failed = errors.New("no answer on the spot")
			return
		}
		out[0] = outMsg{buf: b, to: from}
		if err := io.write(out); err != nil {
			failed = err
			return
		}
		if _, err := client.Read(reply); err != nil {
			failed = err
		}
	}
	round() // the first answer fills the memo
	if allocs := testing.AllocsPerRun(200, round); allocs != 0 || failed != nil {
		t.Errorf("%.1f allocations per query (%v)", allocs, failed)
	}
}

// TestForwardAll is the node-local cache: cluster names come from the
// upstream (the cluster DNS) before any index exists, and from the cache
// while the upstream is away.
func TestForwardAll(t *testing.T) {
	up := dnstest.StartUpstream(t)
	up.Add(t, "kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1")
	s := start(t, Options{Upstream: upstreamWith(t, up), Resolver: resolver.Config{ForwardAll: true}, ForwardTimeout: time.Second}, nil)
	for _, network := range []string{"udp", "tcp"} {
		r := exchange(t, s.Addr(), network, question("kubernetes.default.svc.cluster.local.", dns.TypeA))
		if got := rrs(r.Answer); len(got) != 1 || !strings.HasSuffix(got[0], "A 10.96.0.1") {
			t.Fatalf("%s: answer %v, want the upstream's", network, got)
		}
	}
	if up.Queries() != 1 {
		t.Errorf("upstream asked %d times for one name within its TTL, want 1", up.Queries())
	}
	up.SetDown(true)
	if r := exchange(t, s.Addr(), "udp", question("kubernetes.default.svc.cluster.local.", dns.TypeA)); len(r.Answer) != 1 {
		t.Errorf("cached name with the upstream down: %v", r)
	}
	if r := exchange(t, s.Addr(), "udp", question("other.default.svc.cluster.local.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("uncached name with the upstream down: %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
}
