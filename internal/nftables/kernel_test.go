package nftables

import (
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// sample is a table with every statement svcnet writes.
func sample(f Family) *Table {
	a := func(v4, v6 string) netip.Addr {
		if f == IPv6 {
			return netip.MustParseAddr(v6)
		}
		return netip.MustParseAddr(v4)
	}
	p := func(v4, v6 string) netip.Prefix {
		if f == IPv6 {
			return netip.MustParsePrefix(v6)
		}
		return netip.MustParsePrefix(v4)
	}
	icmp := ICMP
	if f == IPv6 {
		icmp = ICMPv6
	}
	jump := func(c string) Verdict { return Verdict{Kind: Jump, Chain: c} }
	gotoC := func(c string) Verdict { return Verdict{Kind: Goto, Chain: c} }
	return &Table{Family: f, Name: "svcnet-test",
		Sets: []*Set{
			{Name: "cluster-ips", Key: KeyAddr, Comment: "Active ClusterIPs"},
			{Name: "service-ips", Key: KeyAddrProtoPort, Verdicts: true, Comment: "ClusterIP traffic"},
			{Name: "service-nodeports", Key: KeyProtoPort, Verdicts: true},
			{Name: "affinity-X", Key: KeyAddr, Timeout: 3 * time.Hour},
			{Name: "hairpin-connections", Key: KeyConn, Comment: "service hairpin connections"},
		},
		Chains: []*Chain{
			{Name: "nat-prerouting", Hook: &Hook{Type: "nat", Hook: "prerouting", Priority: -100}, Rules: []Rule{R(jump("services"))}},
			{Name: "filter-output", Hook: &Hook{Type: "filter", Hook: "output", Priority: -110}, Rules: []Rule{R(MatchCtNew{}, jump("services"))}},
			{Name: "mark-for-masquerade", Rules: []Rule{R(SetMark{Mark: 0x4000})}},
			{Name: "masquerading", Rules: []Rule{
				R(SetMark{Xor: true, Mark: 0x4000}),
				R(Masquerade{FullyRandom: true}),
				R(MatchMarkSet{Mark: 0x4000}, SetMark{Xor: true, Mark: 0x4000}, Masquerade{FullyRandom: true}),
				R(MatchCtStatusDNAT{}, MatchConnSet{Set: "hairpin-connections"}, Masquerade{FullyRandom: true}),
			}},
			{Name: "endpoint-A", Rules: []Rule{
				R(MatchAddr{Src: true, Prefix: netip.PrefixFrom(a("10.180.0.1", "fd00::1"), a("10.180.0.1", "fd00::1").BitLen())}, jump("mark-for-masquerade")),
				R(UpdateSrcSet{Set: "affinity-X"}),
				R(MatchProto{Proto: TCP}, DNAT{To: netip.AddrPortFrom(a("10.180.0.1", "fd00::1"), 8080)}),
			}},
			{Name: "service-X", Rules: []Rule{
				R(MatchAddr{Prefix: netip.PrefixFrom(a("172.30.0.41", "fd01::41"), a("1.1.1.1", "::1").BitLen())}, MatchProto{Proto: TCP}, MatchDport{Port: 80},
					MatchAddr{Src: true, Neg: true, Prefix: p("10.0.0.0/8", "fd00::/64")}, jump("mark-for-masquerade")),
				R(MatchAddrSet{Src: true, Set: "affinity-X"}, gotoC("endpoint-A")),
				R(Numgen{Targets: []string{"endpoint-A", "endpoint-A", "endpoint-A"}}),
				R(MatchProto{Proto: TCP}, DNATMap{To: []netip.AddrPort{netip.AddrPortFrom(a("10.180.0.1", "fd00::1"), 8080), netip.AddrPortFrom(a("10.180.0.2", "fd00::2"), 80)}}),
			}},
			{Name: "checks", Rules: []Rule{
				R(MatchFibLocal{Src: true}, jump("mark-for-masquerade")).WithComment("masquerade local traffic"),
				R(MatchAddrList{Src: true, Neg: true, Prefixes: []netip.Prefix{p("1.2.3.4/32", "fd02::4/128"), p("198.51.100.128/25", "fd03::/56"), p("203.0.113.0/25", "fd03:0:0:200::/56")}}, Verdict{Kind: Drop}),
				R(Reject{}),
				R(VmapLookup{Daddr: true, Map: "service-ips"}),
				R(MatchFibLocal{}, MatchAddr{Neg: true, Prefix: p("127.0.0.0/8", "::1/128")}, VmapLookup{Map: "service-nodeports"}),
				R(MatchAddrSet{Set: "cluster-ips"}, Reject{}),
				R(MatchAddr{Prefix: p("10.96.0.0/12", "fd04::/108")}, Verdict{Kind: Drop}),
				R(MatchFibLocal{Neg: true}, Verdict{Kind: Accept}),
				R(MatchProto{Proto: TCP}, MatchTCPSyn{}, Verdict{Kind: Drop}),
				R(MatchAddr{Src: true, Prefix: netip.PrefixFrom(a("10.180.0.1", "fd00::1"), a("1.1.1.1", "::1").BitLen())}, MatchProto{Proto: TCP},
					MatchSport{Port: 8080}, MatchTCPRefusal{}, Verdict{Kind: Drop}),
				R(MatchProto{Proto: icmp}, MatchPortUnreachable{}, Verdict{Kind: Drop}),
			}},
			{Name: "services"},
		},
		Elements: map[string][]Element{
			"cluster-ips":         {{Key: Key{Addr: a("172.30.0.41", "fd01::41")}}, {Key: Key{Addr: a("172.30.0.42", "fd01::42")}}},
			"service-ips":         {{Key: Key{Addr: a("172.30.0.41", "fd01::41"), Proto: TCP, Port: 80}, Verdict: gotoC("service-X"), Comment: "ns1/svc1:p80"}},
			"service-nodeports":   {{Key: Key{Proto: UDP, Port: 30080}, Verdict: gotoC("checks")}, {Key: Key{Proto: SCTP, Port: 30081}, Verdict: Verdict{Kind: Drop}}},
			"hairpin-connections": {{Key: Key{Addr: a("10.180.0.1", "fd00::1"), Addr2: a("10.180.0.1", "fd00::1"), Proto: TCP, Port: 8080}}},
		},
	}
}

func testNamespace(t *testing.T) string {
	t.Helper()
	return netnstest.New(t, "nftlib")
}

func open(t *testing.T, ns string, f Family, table string) (*Conn, *Reader) {
	t.Helper()
	var c *Conn
	var r *Reader
	if err := netns.Do(ns, func() (err error) {
		if c, err = Open(); err != nil {
			return err
		}
		r, err = OpenReader(f, table)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); r.Close() })
	return c, r
}

// withoutTableComments drops what the reader cannot see.
func withoutTableComments(t *Table) *Table {
	c := *t
	c.Comment = ""
	c.Chains = nil
	for _, ch := range t.Chains {
		cc := *ch
		cc.Comment = ""
		c.Chains = append(c.Chains, &cc)
	}
	return &c
}

// TestRoundTrip writes a table with every statement through netlink,
// reads it back, and expects the same table; nft must list it too, as
// the statements' printed form says.
func TestRoundTrip(t *testing.T) {
	for _, f := range []Family{IPv4, IPv6} {
		t.Run(f.String(), func(t *testing.T) {
			ns := testNamespace(t)
			want := sample(f)
			c, r := open(t, ns, f, want.Name)
			if ok, err := r.Exists(); err != nil || ok {
				t.Fatalf("table exists before it was made: %v %v", ok, err)
			}
			tx := NewTx(f, want.Name)
			tx.AddAll(want)
			if err := c.Run(tx); err != nil {
				t.Fatal(err)
			}
			if ok, err := r.Exists(); err != nil || !ok {
				t.Fatalf("table missing after it was made: %v %v", ok, err)
			}
			got, err := r.Table()
			if err != nil {
				t.Fatal(err)
			}
			if g, w := got.Format(), withoutTableComments(want).Format(); g != w {
				t.Errorf("read back:\n%s\nwant:\n%s", g, w)
			}
			out, err := exec.Command("ip", "netns", "exec", ns, "nft", "list", "table", f.String(), want.Name).CombinedOutput()
			if err != nil {
				t.Fatalf("nft cannot list the table: %v: %s", err, out)
			}
			for _, s := range []string{"numgen random mod 3 vmap", "masquerade fully-random", "update @affinity-X", "comment \"ns1/svc1:p80\"", "timeout 3h", "tcp flags",
				"sport 8080", "sequence 0", "code port-unreachable", "ct status dnat", "meta l4proto . th dport @hairpin-connections",
				" to numgen random mod 2 map { 0 : ", "!= 0x00000000 meta mark set"} {
				if !strings.Contains(string(out), s) {
					t.Errorf("nft's listing lacks %q:\n%s", s, out)
				}
			}
		})
	}
}

// TestTransactionIsAtomic sends a transaction whose last message fails:
// nothing of it may stay, and the error names the message.
func TestTransactionIsAtomic(t *testing.T) {
	ns := testNamespace(t)
	want := sample(IPv4)
	c, r := open(t, ns, IPv4, want.Name)
	tx := NewTx(IPv4, want.Name)
	tx.AddAll(want)
	if err := c.Run(tx); err != nil {
		t.Fatal(err)
	}
	before, err := r.Table()
	if err != nil {
		t.Fatal(err)
	}
	tx = NewTx(IPv4, want.Name)
	tx.FlushChain("service-X")
	tx.AddChain(&Chain{Name: "new-chain"})
	tx.DeleteChain("mark-for-masquerade") // still referenced: EBUSY
	err = c.Run(tx)
	var nerr *Error
	if !errors.As(err, &nerr) || nerr.Errno != syscall.EBUSY || nerr.Name != "mark-for-masquerade" {
		t.Fatalf("got %v, want EBUSY deleting mark-for-masquerade", err)
	}
	after, err := r.Table()
	if err != nil {
		t.Fatal(err)
	}
	if before.Format() != after.Format() {
		t.Errorf("a failed transaction changed the table:\n%s\nwas:\n%s", after.Format(), before.Format())
	}
}

// TestBigTransaction sends one batch far beyond the socket's default
// buffer: 20,000 chains with a rule each and 20,000 map elements.
func TestBigTransaction(t *testing.T) {
	ns := testNamespace(t)
	c, r := open(t, ns, IPv4, "svcnet-big")
	m := &Set{Name: "m", Key: KeyAddrProtoPort, Verdicts: true}
	tx := NewTx(IPv4, "svcnet-big")
	tx.AddTable("")
	tx.AddSet(m)
	const n = 20000
	var elems []Element
	for i := range n {
		name := fmt.Sprintf("c%d", i)
		tx.AddChain(&Chain{Name: name})
		tx.AddRule(name, R(MatchProto{Proto: TCP}, DNAT{To: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 80)}))
		elems = append(elems, Element{Key: Key{Addr: netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)}), Proto: TCP, Port: 80}, Verdict: Verdict{Kind: Goto, Chain: name}})
	}
	tx.AddElements(m, elems)
	if err := c.Run(tx); err != nil {
		t.Fatalf("%d messages, %d bytes: %v", tx.Len(), tx.Bytes(), err)
	}
	names, err := r.ChainNames()
	if err != nil || len(names) != n {
		t.Fatalf("%d chains, want %d (%v)", len(names), n, err)
	}
	got, err := r.Elements(m)
	if err != nil || len(got) != n {
		t.Fatalf("%d elements, want %d (%v)", len(got), n, err)
	}
}
