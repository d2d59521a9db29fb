package server

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/internal/dns/index"
	"github.com/svcnet/svcnet/internal/dns/resolver"
)

// answerUDP answers one datagram as the read loop answers a batch of
// them (serveUDP).
func (s *Server) answerUDP(ctx context.Context, raw []byte, from netip.AddrPort, buf []byte, key *[]byte) ([]byte, *query) {
	looks := [1]memoLook{{key: *key}}
	s.lookUp(raw, &looks[0])
	*key = looks[0].key
	find(looks[:])
	verify(looks[:])
	return s.answerLooked(ctx, raw, from, buf, &looks[0])
}

// lookup returns the entry for key, whether it holds or not, and its
// shard, without counting.
func (m *memo) lookup(key []byte) (*memoEntry, *memoShard) {
	h := hash(key)
	s := m.shard(h)
	return s.t.Load().find(h).ifKey(key), s
}

// get returns the entry for key if it holds in the snapshot idx at now.
func (m *memo) get(key []byte, now time.Time, idx *index.Index) (*memoEntry, bool) {
	e, s := m.lookup(key)
	return e, s.holds(e, now, idx)
}

func pack(t *testing.T, name string, qtype uint16, edit func(*dns.Msg)) []byte {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = 0x1234
	if edit != nil {
		edit(m)
	}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMemoAnswersLikeTheFullPath: whatever the memo answers is byte for
// byte what the full path answers, for the same query with any ID and RD
// and CD bits; and only answers that depend on nothing but the question
// are kept.
func TestMemoAnswersLikeTheFullPath(t *testing.T) {
	s, err := New(Options{Logger: quiet, Registerer: prometheus.NewRegistry(),
		Resolver: resolver.Config{Autopath: true}})
	if err != nil {
		t.Fatal(err)
	}
	s.SetIndex(buildIndex(fixture()), time.Time{})
	pod := netip.MustParseAddrPort("127.0.0.1:5353") // a pod of the fixture: autopath applies
	other := netip.MustParseAddrPort("127.0.0.2:5353")
	edns := func(size uint16, do bool) func(*dns.Msg) { return func(m *dns.Msg) { m.SetEdns0(size, do) } }

	cases := []struct {
		name     string
		pkt      []byte
		client   netip.AddrPort
		memoized bool
	}{
		{"A", pack(t, "kubernetes.default.svc.cluster.local.", dns.TypeA, nil), other, true},
		{"A with EDNS and DO", pack(t, "kubernetes.default.svc.cluster.local.", dns.TypeA, edns(4096, true)), other, true},
		{"mixed case", pack(t, "KuberNetes.default.svc.cluster.local.", dns.TypeA, nil), other, true},
		{"headless", pack(t, "web.default.svc.cluster.local.", dns.TypeA, edns(1232, false)), other, true},
		{"SRV with additional records", pack(t, "_http._tcp.web.default.svc.cluster.local.", dns.TypeSRV, nil), other, true},
		{"truncated for 512 bytes", pack(t, "big.default.svc.cluster.local.", dns.TypeA, nil), other, true},
		{"big answer with EDNS", pack(t, "big.default.svc.cluster.local.", dns.TypeA, edns(4096, false)), other, true},
		{"PTR", pack(t, "1.0.96.10.in-addr.arpa.", dns.TypePTR, nil), other, true},
		{"NODATA", pack(t, "kubernetes.default.svc.cluster.local.", dns.TypeAAAA, nil), other, true},
		{"ExternalName inside the zone", pack(t, "ext-internal.default.svc.cluster.local.", dns.TypeA, nil), other, true},
		{"refused class", pack(t, "kubernetes.default.svc.cluster.local.", dns.TypeA, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }), other, true},
		{"NXDOMAIN with autopath on", pack(t, "nope.default.svc.cluster.local.", dns.TypeA, nil), other, false},
		{"autopath", pack(t, "db.other.default.svc.cluster.local.", dns.TypeA, nil), pod, false},
		{"outside name", pack(t, "example.com.", dns.TypeA, nil), other, false},
		{"ExternalName to the outside", pack(t, "ext.default.svc.cluster.local.", dns.TypeA, nil), other, false},
		{"EDNS version 1", pack(t, "kubernetes.default.svc.cluster.local.", dns.TypeA, func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.IsEdns0().SetVersion(1)
		}), other, false},
		{"notify", pack(t, "cluster.local.", dns.TypeSOA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }), other, false},
		{"two questions", pack(t, "cluster.local.", dns.TypeSOA, func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) }), other, false},
	}
	buf := make([]byte, 4096)
	var key []byte
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := s.memo.n.Load()
			first, later := s.answerUDP(context.Background(), tc.pkt, tc.client, buf, &key)
			if later != nil {
				if tc.memoized {
					t.Fatal("needs an upstream")
				}
				return
			}
			first = append([]byte(nil), first...)
			if got := s.memo.n.Load() > before; got != tc.memoized {
				t.Fatalf("memoized = %v, want %v", got, tc.memoized)
			}
			// Ask again with another ID and the RD and CD bits flipped.
			again := append([]byte(nil), tc.pkt...)
			again[0], again[1] = 0xbe, 0xef
			again[2] ^= 0x01
			again[3] ^= 0x10
			want := s.handle(context.Background(), again, tc.client.Addr(), false)
			got, _ := s.answerUDP(context.Background(), again, tc.client, buf, &key)
			if !bytes.Equal(got, want) {
				t.Errorf("second answer differs from the full path's:\n got %x\nwant %x", got, want)
			}
			if wantFirst := s.handle(context.Background(), tc.pkt, tc.client.Addr(), false); !bytes.Equal(first, wantFirst) {
				t.Errorf("first answer differs from the full path's:\n got %x\nwant %x", first, wantFirst)
			}
		})
	}
}

// TestMemoDiesWithItsSnapshot: a new index answers at once, whatever the
// memo of the old one held.
func TestMemoDiesWithItsSnapshot(t *testing.T) {
	s, err := New(Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	svc := func(ip string) *index.Index {
		return index.Build(index.Options{}, []*corev1.Service{dnstest.Service("default", "moving", []string{ip})}, nil, nil)
	}
	pkt := pack(t, "moving.default.svc.cluster.local.", dns.TypeA, nil)
	client := netip.MustParseAddrPort("127.0.0.1:1")
	buf := make([]byte, 512)
	var key []byte
	for _, ip := range []string{"10.96.0.5", "10.96.0.6", "10.96.0.5"} {
		s.SetIndex(svc(ip), time.Time{})
		for range 2 { // the second answer comes from the memo
			out, _ := s.answerUDP(context.Background(), pkt, client, buf, &key)
			m := new(dns.Msg)
			if err := m.Unpack(out); err != nil {
				t.Fatal(err)
			}
			if len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != ip {
				t.Fatalf("answer %v, want %s", m.Answer, ip)
			}
		}
	}
}

func TestMemoKey(t *testing.T) {
	ok := pack(t, "a.b.", dns.TypeA, nil)
	cases := []struct {
		name string
		pkt  []byte
		want bool
	}{
		{"plain", ok, true},
		{"EDNS", pack(t, "a.b.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, true) }), true},
		{"response", pack(t, "a.b.", dns.TypeA, func(m *dns.Msg) { m.Response = true }), false},
		{"opcode", pack(t, "a.b.", dns.TypeA, func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate }), false},
		{"trailing bytes", append(append([]byte(nil), ok...), 0), false},
		{"cut short", ok[:len(ok)-1], false},
		{"compressed name", []byte{0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1}, false},
		{"answer section", pack(t, "a.b.", dns.TypeA, func(m *dns.Msg) {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "a.b.", Rrtype: dns.TypeA, Class: 1}, A: net.IPv4(1, 2, 3, 4)}}
		}), false},
		{"additional that is not OPT", pack(t, "a.b.", dns.TypeA, func(m *dns.Msg) {
			m.Extra = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "a.b.", Rrtype: dns.TypeA, Class: 1}, A: net.IPv4(1, 2, 3, 4)}}
		}), false},
		{"EDNS version 1", pack(t, "a.b.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false); m.IsEdns0().SetVersion(1) }), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := memoKey(tc.pkt, 1232, nil); got != tc.want {
				t.Errorf("memoKey ok = %v, want %v", got, tc.want)
			}
		})
	}
	// The key tells apart what changes the answer: case, EDNS, DO, size.
	keys := map[string]bool{}
	for _, p := range [][]byte{
		ok,
		pack(t, "A.b.", dns.TypeA, nil),
		pack(t, "a.b.", dns.TypeAAAA, nil),
		pack(t, "a.b.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false) }),
		pack(t, "a.b.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, true) }),
		pack(t, "a.b.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(800, false) }),
	} {
		k, _ := memoKey(p, 1232, nil)
		keys[string(k)] = true
	}
	if len(keys) != 6 {
		t.Errorf("%d distinct keys for 6 different questions", len(keys))
	}
}

// TestMemoRepeatsTheForwardCacheWhileItHolds: a forward-cache answer is
// repeated only while the cache would give the same bytes; once its TTLs
// have aged a second, the next answer shows it.
func TestMemoRepeatsTheForwardCacheWhileItHolds(t *testing.T) {
	up := dnstest.StartUpstream(t)
	up.Add(t, "www.example.org. 300 IN A 192.0.2.80")
	s, err := New(Options{Logger: quiet, Upstream: upstreamWith(t, up)})
	if err != nil {
		t.Fatal(err)
	}
	s.SetIndex(buildIndex(fixture()), time.Time{})
	client := netip.MustParseAddrPort("127.0.0.2:1")
	pkt := pack(t, "www.example.org.", dns.TypeA, nil)
	buf := make([]byte, 512)
	var key []byte
	ttl := func() uint32 {
		t.Helper()
		out, later := s.answerUDP(context.Background(), pkt, client, buf, &key)
		if later != nil { // the first time: the cache is empty
			q := *later
			q.resp, q.source = q.wait(context.Background())
			out = s.finish(&q, buf)
		}
		m := new(dns.Msg)
		if err := m.Unpack(out); err != nil || len(m.Answer) != 1 {
			t.Fatalf("answer %v %v", m, err)
		}
		return m.Answer[0].Header().Ttl
	}
	first := ttl()
	for range 3 {
		if got := ttl(); got != first && got != first-1 {
			t.Fatalf("TTL %d, then %d", first, got)
		}
	}
	if up.QueriesFor("www.example.org.") != 1 {
		t.Errorf("upstream asked %d times", up.QueriesFor("www.example.org."))
	}
	if s.memo.n.Load() != 1 {
		t.Errorf("memo has %d entries, want the forward answer", s.memo.n.Load())
	}
	time.Sleep(2100 * time.Millisecond)
	if got := ttl(); got > first-2 {
		t.Errorf("TTL %d two seconds after %d: the memo repeated an answer past its second", got, first)
	}
}

// TestWildcardAnswersFromTheAskedAddress: on a wildcard socket each
// batched reply leaves from the address its query was sent to; a client
// (connected UDP, as stub resolvers use) drops replies from any other.
// 127.0.0.2 is on loopback but is never the source the kernel would pick
// by itself.
func TestWildcardAnswersFromTheAskedAddress(t *testing.T) {
	cases := []struct{ listen, ask string }{
		{"0.0.0.0:0", "127.0.0.2"},
		{"[::]:0", "127.0.0.2"},
		{"[::]:0", "::1"},
	}
	for _, tc := range cases {
		t.Run(tc.listen+" asked at "+tc.ask, func(t *testing.T) {
			if strings.Contains(tc.ask, ":") || strings.HasPrefix(tc.listen, "[") {
				needIPv6Loopback(t)
			}
			s := startAt(t, tc.listen, Options{}, buildIndex(fixture()))
			_, port, _ := net.SplitHostPort(s.Addr())
			c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
			for range 3 { // the first from the full path, then from the memo
				m, _, err := c.Exchange(question("kubernetes.default.svc.cluster.local.", dns.TypeA), net.JoinHostPort(tc.ask, port))
				if err != nil {
					t.Fatalf("query to %s: %v", tc.ask, err)
				}
				if len(m.Answer) != 1 {
					t.Fatalf("answer %v", m.Answer)
				}
			}
		})
	}
}

// TestMemoKeepsUnchangedNames: a snapshot that changes one Service keeps
// the memo of every other name; the changed name, and denials when the
// SOA serial moves, are answered afresh.
func TestMemoKeepsUnchangedNames(t *testing.T) {
	s, err := New(Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	u := index.NewUpdater(index.Options{})
	set := func(name, ip string) {
		u.SetService("default", name, dnstest.Service("default", name, []string{ip}), nil)
	}
	client := netip.MustParseAddrPort("127.0.0.1:1")
	buf := make([]byte, 512)
	var key []byte
	ask := func(name string, qtype uint16) (*dns.Msg, *memoEntry) {
		t.Helper()
		pkt := pack(t, name, qtype, nil)
		out, _ := s.answerUDP(context.Background(), pkt, client, buf, &key)
		m := new(dns.Msg)
		if err := m.Unpack(out); err != nil {
			t.Fatal(err)
		}
		k, _ := memoKey(pkt, s.opts.UDPSize, nil)
		e, _ := s.memo.lookup(k)
		return m, e
	}
	addr := func(m *dns.Msg) string {
		if len(m.Answer) != 1 {
			return dns.RcodeToString[m.Rcode]
		}
		return m.Answer[0].(*dns.A).A.String()
	}
	const a, b, missing = "a.default.svc.cluster.local.", "b.default.svc.cluster.local.", "nope.default.svc.cluster.local."
	set("a", "10.96.0.1")
	set("b", "10.96.0.2")
	s.SetIndex(u.Snapshot(1), time.Time{})
	_, ea := ask(a, dns.TypeA)
	_, eb := ask(b, dns.TypeA)
	_, en := ask(missing, dns.TypeA)
	if ea == nil || eb == nil || en == nil {
		t.Fatal("answers not memoized")
	}

	set("b", "10.96.0.3")
	s.SetIndex(u.Snapshot(1), time.Time{})
	if m, e := ask(a, dns.TypeA); addr(m) != "10.96.0.1" || e != ea {
		t.Errorf("unchanged name after another's change: %s, memo entry kept %v", addr(m), e == ea)
	}
	if m, e := ask(b, dns.TypeA); addr(m) != "10.96.0.3" || e == eb {
		t.Errorf("changed name: %s, memo entry replaced %v", addr(m), e != eb)
	}
	if _, e := ask(missing, dns.TypeA); e != en {
		t.Error("a denial was answered afresh though nothing it read changed")
	}

	// A new serial: answers carrying the SOA are made again, others kept.
	s.SetIndex(u.Snapshot(2), time.Time{})
	if m, e := ask(missing, dns.TypeA); e == en || len(m.Ns) != 1 || m.Ns[0].(*dns.SOA).Serial != 2 {
		t.Errorf("denial after a new serial: memo entry replaced %v, authority %v", e != en, m.Ns)
	}
	if _, e := ask(a, dns.TypeA); e != ea {
		t.Error("an address answer was made again for a new serial")
	}

	// The missing name appears.
	set("nope", "10.96.0.9")
	s.SetIndex(u.Snapshot(2), time.Time{})
	if m, _ := ask(missing, dns.TypeA); addr(m) != "10.96.0.9" {
		t.Errorf("a new name after its NXDOMAIN was memoized: %s", addr(m))
	}
}

// TestMemoCounts: each lookup counts once, as a hit, a miss or a stale
// entry, and the metrics show the sums.
func TestMemoCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := New(Options{Logger: quiet, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	svc := func(ip string) *index.Index {
		return index.Build(index.Options{}, []*corev1.Service{dnstest.Service("default", "counted", []string{ip})}, nil, nil)
	}
	pkt := pack(t, "counted.default.svc.cluster.local.", dns.TypeA, nil)
	client := netip.MustParseAddrPort("127.0.0.1:1")
	buf := make([]byte, 512)
	var key []byte
	type counts struct{ hits, misses, stale, entries uint64 }
	scrape := func() counts {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var c counts
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				switch f.GetName() {
				case "svcnet_dns_memo_lookups_total":
					v := uint64(m.GetCounter().GetValue())
					switch m.GetLabel()[0].GetValue() {
					case "hit":
						c.hits = v
					case "miss":
						c.misses = v
					case "stale":
						c.stale = v
					}
				case "svcnet_dns_memo_entries":
					c.entries = uint64(m.GetGauge().GetValue())
				}
			}
		}
		return c
	}
	for _, step := range []struct {
		name string
		ip   string // a new snapshot with this address; "": the same
		want counts
	}{
		{"first ask: a miss, then memoized", "10.96.0.5", counts{0, 1, 0, 1}},
		{"second ask: a hit", "", counts{1, 1, 0, 1}},
		{"third ask: a hit", "", counts{2, 1, 0, 1}},
		{"the Service moved: stale, then memoized afresh", "10.96.0.6", counts{2, 1, 1, 1}},
		{"then a hit again", "", counts{3, 1, 1, 1}},
	} {
		if step.ip != "" {
			s.SetIndex(svc(step.ip), time.Time{})
		}
		if _, later := s.answerUDP(context.Background(), pkt, client, buf, &key); later != nil {
			t.Fatal("needs an upstream")
		}
		if got := scrape(); got != step.want {
			t.Errorf("%s: %+v, want %+v", step.name, got, step.want)
		}
	}
}

// TestMemoSameHashOtherKey: an entry found under a key's hash answers
// only if it holds that very key.
func TestMemoSameHashOtherKey(t *testing.T) {
	m := newMemo()
	a, b := []byte("key a"), []byte("key b")
	m.put(a, make([]byte, 12), dns.TypeA, 0, "zone", time.Time{}, nil, 1)
	ea, _ := m.lookup(a)
	if ea == nil {
		t.Fatal("key a not found")
	}
	// Put a's entry where b's hash leads, as a collision would.
	hb := hash(b)
	sb := m.shard(hb)
	sb.mu.Lock()
	sb.insert(hb, ea)
	sb.mu.Unlock()
	if e, _ := m.lookup(b); e != nil {
		t.Errorf("key b found the entry of key %q", e.key())
	}
	if e, _ := m.lookup(a); e != ea {
		t.Error("key a lost its entry")
	}
}

// TestMemoFull: a full memo starts again empty once, however many puts
// find it full at once, and its count stays the number of entries.
func TestMemoFull(t *testing.T) {
	entries := func(m *memo) int {
		n := 0
		for i := range m.shards {
			n += m.shards[i].len()
		}
		return n
	}
	t.Run("one at a time", func(t *testing.T) {
		m := newMemo()
		m.max = 4
		for i := range 10 {
			m.put([]byte(fmt.Sprint("key ", i)), make([]byte, 12), dns.TypeA, 0, "zone", time.Time{}, nil, 1)
		}
		// 4 fill it; the 5th empties it and stays; 4 more fill it; the
		// 9th empties it; 9 and 10 stay.
		if m.resets.Load() != 2 || m.n.Load() != 2 || entries(m) != 2 {
			t.Errorf("%d resets, count %d, %d entries; want 2, 2, 2", m.resets.Load(), m.n.Load(), entries(m))
		}
		if e, _ := m.lookup([]byte("key 9")); e == nil {
			t.Error("the put that found the memo full is not in it")
		}
	})
	t.Run("at once", func(t *testing.T) {
		m := newMemo()
		m.max = 50
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 500 {
					m.put([]byte(fmt.Sprint("key ", g, " ", i)), make([]byte, 12), dns.TypeA, 0, "zone", time.Time{}, nil, 1)
				}
			})
		}
		wg.Wait()
		if n := m.n.Load(); int(n) != entries(m) || n > m.max || m.resets.Load() == 0 {
			t.Errorf("count %d, %d entries, %d resets; want the count to be the entries, at most %d, and resets",
				n, entries(m), m.resets.Load(), m.max)
		}
		// Each reset followed max puts at least: no put emptied a memo
		// another had just emptied.
		if r := m.resets.Load(); r > 8*500/uint64(m.max) {
			t.Errorf("%d resets for %d puts of a memo of %d", r, 8*500, m.max)
		}
	})
}

// TestMemoSizes: shards are two cache lines apart, so that lookups on
// two cores in two shards write no line in common; an entry fills its
// allocation's size class (256 bytes) and no more.
func TestMemoSizes(t *testing.T) {
	if n := unsafe.Sizeof(memoShard{}); n != 128 {
		t.Errorf("memoShard is %d bytes, want 128", n)
	}
	if n := unsafe.Sizeof(memoEntry{}); n != 256 {
		t.Errorf("memoEntry is %d bytes, want 256", n)
	}
	if at := unsafe.Offsetof(memoEntry{}.inline); at != memoInlineAt {
		t.Errorf("inline is at %d, memoInlineAt says %d", at, memoInlineAt)
	}
}

// TestMemoInline: the bound the comments give — an A answer with EDNS
// for a name of 69 characters lies in the entry, of 70 apart — and both
// read back whole.
func TestMemoInline(t *testing.T) {
	for _, tc := range []struct {
		n      int
		qtype  uint16
		inline bool
	}{
		{69, dns.TypeA, true},
		{70, dns.TypeA, false},
		{63, dns.TypeAAAA, true},
		{64, dns.TypeAAAA, false},
	} {
		name := strings.Repeat("x", tc.n-18) + ".svc.cluster.local."
		if len(name)-1 != tc.n {
			t.Fatalf("name %q is %d characters", name, len(name)-1)
		}
		opt := func(m *dns.Msg) { m.SetEdns0(1232, false) }
		query := pack(t, name, tc.qtype, opt)
		key, ok := memoKey(query, 1232, nil)
		if !ok {
			t.Fatalf("%d: no key", tc.n)
		}
		resp := pack(t, name, tc.qtype, func(m *dns.Msg) {
			m.Response, m.Compress = true, true
			if tc.qtype == dns.TypeA {
				m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.IPv4(10, 96, 0, 1)}}
			} else {
				m.Answer = []dns.RR{&dns.AAAA{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 5}, AAAA: net.ParseIP("fd00::1")}}
			}
			opt(m)
		})
		m := newMemo()
		m.put(key, resp, tc.qtype, 0, sourceZone, time.Time{}, nil, 1)
		e, _ := m.lookup(key)
		if e == nil {
			t.Fatalf("%d: not found", tc.n)
		}
		if inline := e.far == nil; inline != tc.inline {
			t.Errorf("%s of %d characters (%d bytes): inline %v, want %v", dns.TypeToString[tc.qtype], tc.n, len(key)+len(resp), inline, tc.inline)
		}
		got := e.reply(query, nil)
		if want := append([]byte(nil), resp...); !bytes.Equal(got[4:], want[4:]) || !bytes.Equal(got[:2], query[:2]) {
			t.Errorf("%d: reply differs from the answer put", tc.n)
		}
	}
}

// TestMemoUntil: a forwarded answer holds until the time it was put
// with and is stale from then on. (That the monotonic clock decides is
// time.Time.Sub's: a test cannot step the wall clock.)
func TestMemoUntil(t *testing.T) {
	m := newMemo()
	idx := index.Build(index.Options{}, nil, nil, nil)
	key := []byte("forwarded")
	now := time.Now()
	m.put(key, make([]byte, 12), dns.TypeA, 0, sourceForward, now.Add(time.Second), nil, idx.Gen())
	for _, tc := range []struct {
		at   time.Time
		want bool
	}{
		{now, true},
		{now.Add(999 * time.Millisecond), true},
		{now.Add(time.Second), false},
		{now.Add(time.Hour), false},
	} {
		_, ok := m.get(key, tc.at, idx)
		if ok != tc.want {
			t.Errorf("at +%v: holds %v, want %v", tc.at.Sub(now), ok, tc.want)
		}
	}
	e, _ := m.lookup(key)
	if e.source() != sourceForward || e.src != srcForward {
		t.Errorf("source %q (%d), want %q (%d)", e.source(), e.src, sourceForward, srcForward)
	}
}

// TestMemoLookupsWhileWriting: lookups without a lock, beside puts that
// grow the shards' tables and resets that empty them, find either
// nothing or the entry put for their very key; once the puts are done,
// every key is found.
func TestMemoLookupsWhileWriting(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  int32
	}{
		{"growing", maxMemo},
		{"resetting", 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemo()
			m.max = tc.max
			const keys = 20000
			wire := func(i int) []byte { return fmt.Appendf(make([]byte, 12), "answer %d", i) }
			var wg sync.WaitGroup
			done := make(chan struct{})
			var wrong sync.Map
			for r := range 2 {
				wg.Go(func() {
					for i := r; ; i = (i + 7) % keys {
						select {
						case <-done:
							return
						default:
						}
						key := fmt.Appendf(nil, "key %d", i)
						if e, _ := m.lookup(key); e != nil && !bytes.Equal(e.wire()[12:], wire(i)[12:]) {
							wrong.Store(i, string(e.wire()[12:]))
						}
					}
				})
			}
			for g := range 2 {
				wg.Go(func() {
					for i := g; i < keys; i += 2 {
						m.put(fmt.Appendf(nil, "key %d", i), wire(i), dns.TypeA, 0, "zone", time.Time{}, nil, 1)
					}
				})
			}
			for m.n.Load() < tc.max && m.resets.Load() == 0 {
				if n := m.n.Load(); tc.max == maxMemo && n >= keys {
					break
				}
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			close(done)
			wg.Wait()
			wrong.Range(func(k, v any) bool {
				t.Errorf("key %d found the answer %q", k, v)
				return true
			})
			if tc.max == maxMemo {
				for i := range keys {
					if e, _ := m.lookup(fmt.Appendf(nil, "key %d", i)); e == nil {
						t.Fatalf("key %d, put, is not found", i)
					}
				}
			} else if m.resets.Load() == 0 {
				t.Error("no reset")
			}
		})
	}
}
