package nftables

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

func TestFormat(t *testing.T) {
	pfx := netip.MustParsePrefix
	cases := []struct {
		f    Family
		rule Rule
		want string
	}{
		{IPv4, R(MatchAddr{Prefix: pfx("172.30.0.41/32")}, MatchProto{Proto: TCP}, MatchDport{Port: 80},
			MatchAddr{Src: true, Neg: true, Prefix: pfx("10.0.0.0/8")}, Verdict{Kind: Jump, Chain: "mark-for-masquerade"}),
			"ip daddr 172.30.0.41 meta l4proto tcp th dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade"},
		{IPv6, R(MatchAddrSet{Src: true, Set: "aff"}, Verdict{Kind: Goto, Chain: "ep"}), "ip6 saddr @aff goto ep"},
		{IPv4, R(MatchAddrList{Src: true, Neg: true, Prefixes: []netip.Prefix{pfx("203.0.113.0/25"), pfx("10.1.2.3/32")}}, Verdict{Kind: Drop}),
			"ip saddr != { 203.0.113.0/25, 10.1.2.3 } drop"},
		{IPv4, R(Numgen{Targets: []string{"a", "b"}}), "numgen random mod 2 vmap { 0 : goto a, 1 : goto b }"},
		{IPv4, R(MatchFibLocal{Src: true}, Verdict{Kind: Jump, Chain: "m"}).WithComment("masquerade local traffic"),
			`fib saddr type local jump m comment "masquerade local traffic"`},
		{IPv6, R(MatchFibLocal{}, MatchAddr{Neg: true, Prefix: pfx("::1/128")}, VmapLookup{Map: "service-nodeports"}),
			"fib daddr type local ip6 daddr != ::1 meta l4proto . th dport vmap @service-nodeports"},
		{IPv6, R(VmapLookup{Daddr: true, Map: "service-ips"}), "ip6 daddr . meta l4proto . th dport vmap @service-ips"},
		{IPv4, R(MatchMarkSet{Mark: 0x4000}, SetMark{Xor: true, Mark: 0x4000}, Masquerade{FullyRandom: true}),
			"meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random"},
		{IPv4, R(MatchCtStatusDNAT{}, MatchConnSet{Set: "hairpin"}, Masquerade{}),
			"ct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin masquerade"},
		{IPv6, R(MatchProto{Proto: UDP}, DNATMap{To: []netip.AddrPort{netip.MustParseAddrPort("[fd00::5]:53"), netip.MustParseAddrPort("[fd00::6]:53")}}),
			"meta l4proto udp dnat ip6 to numgen random mod 2 map { 0 : fd00::5 . 53, 1 : fd00::6 . 53 }"},
		{IPv4, R(SetMark{Mark: 0x4000}), "meta mark set meta mark | 0x00004000"},
		{IPv4, R(SetMark{Xor: true, Mark: 0x4000}), "meta mark set meta mark ^ 0x00004000"},
		{IPv6, R(UpdateSrcSet{Set: "aff"}), "update @aff { ip6 saddr }"},
		{IPv6, R(MatchProto{Proto: SCTP}, DNAT{To: netip.MustParseAddrPort("[fd00::5]:80")}), "meta l4proto sctp dnat to [fd00::5]:80"},
		{IPv4, R(MatchCtNew{}, Verdict{Kind: Jump, Chain: "x"}), "ct state new jump x"},
		{IPv4, R(MatchProto{Proto: TCP}, MatchTCPSyn{}, Verdict{Kind: Drop}), "meta l4proto tcp tcp flags syn / syn,ack drop"},
		{IPv4, R(MatchProto{Proto: TCP}, MatchSport{Port: 53}, MatchTCPRefusal{}, Verdict{Kind: Drop}),
			"meta l4proto tcp th sport 53 tcp flags rst,ack / fin,syn,rst,ack tcp sequence 0 drop"},
		{IPv4, R(MatchProto{Proto: ICMP}, MatchPortUnreachable{}, Verdict{Kind: Drop}),
			"meta l4proto icmp icmp type destination-unreachable icmp code port-unreachable drop"},
		{IPv6, R(MatchProto{Proto: ICMPv6}, MatchPortUnreachable{}, Verdict{Kind: Drop}),
			"meta l4proto ipv6-icmp icmpv6 type destination-unreachable icmpv6 code port-unreachable drop"},
		{IPv4, R(Masquerade{FullyRandom: true}), "masquerade fully-random"},
		{IPv4, R(MatchAddrSet{Set: "cluster-ips"}, Reject{}), "ip daddr @cluster-ips reject"},
	}
	for _, c := range cases {
		if got := c.rule.Format(c.f); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

// TestIntervals encodes prefix lists as interval sets and reads them
// back: overlapping and adjacent prefixes merge, the rest survive.
func TestIntervals(t *testing.T) {
	pfx := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	cases := []struct {
		f        Family
		in, want []netip.Prefix
	}{
		{IPv4, pfx("203.0.113.0/25", "1.2.3.4/32"), pfx("1.2.3.4/32", "203.0.113.0/25")},
		{IPv4, pfx("203.0.113.0/25", "203.0.113.128/25"), pfx("203.0.113.0/24")},
		{IPv4, pfx("10.0.0.0/8", "10.1.0.0/16"), pfx("10.0.0.0/8")},
		{IPv4, pfx("0.0.0.0/0"), pfx("0.0.0.0/0")},
		{IPv4, pfx("0.0.0.0/1", "255.255.255.255/32"), pfx("0.0.0.0/1", "255.255.255.255/32")},
		{IPv4, pfx("10.0.0.1/32", "10.0.0.2/32"), pfx("10.0.0.1/32", "10.0.0.2/32")},
		{IPv6, pfx("fd00::/64", "fd00:0:0:1::/64", "::1/128"), pfx("::1/128", "fd00::/63")},
	}
	for _, c := range cases {
		elems, err := intervalElems(c.f, c.in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := prefixesOf(c.f, elems)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: got %v, want %v", c.in, got, c.want)
		}
	}
}

func TestKeys(t *testing.T) {
	for _, c := range []struct {
		f Family
		t KeyType
		k Key
	}{
		{IPv4, KeyAddr, Key{Addr: netip.MustParseAddr("10.0.0.1")}},
		{IPv4, KeyProtoPort, Key{Proto: UDP, Port: 30053}},
		{IPv4, KeyAddrProtoPort, Key{Addr: netip.MustParseAddr("10.96.0.10"), Proto: SCTP, Port: 53}},
		{IPv6, KeyAddrProtoPort, Key{Addr: netip.MustParseAddr("fd00::10"), Proto: TCP, Port: 443}},
	} {
		b, err := encodeKey(c.f, c.t, c.k)
		if err != nil {
			t.Fatal(err)
		}
		if _, n := c.t.magic(c.f); int(n) != len(b) {
			t.Errorf("%v: key of %d bytes, type says %d", c.k, len(b), n)
		}
		back, err := decodeKey(c.f, c.t, b)
		if err != nil || back != c.k {
			t.Errorf("%v came back as %v (%v)", c.k, back, err)
		}
	}
	if _, err := encodeKey(IPv4, KeyAddr, Key{Addr: netip.MustParseAddr("fd00::1")}); err == nil {
		t.Error("an IPv6 key went into an IPv4 set")
	}
}

// TestEncoding encodes the expressions of every statement and decodes
// them with the netlink library: the same expressions must come back.
func TestEncoding(t *testing.T) {
	for _, f := range []Family{IPv4, IPv6} {
		for _, c := range sample(f).Chains {
			for _, r := range c.Rules {
				n := uint32(0)
				comp, err := compile(f, r, func() uint32 { n++; return n })
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range comp.exprs {
					tx := NewTx(f, "t")
					if err := tx.expr(e); err != nil {
						t.Fatalf("%s: %v", r.Format(f), err)
					}
					got, err := decodeOne(f, tx.buf[batchHeader:])
					if err != nil {
						t.Fatalf("%s: %T: %v", r.Format(f), e, err)
					}
					if !reflect.DeepEqual(got, e) {
						t.Errorf("%s: encoded %#v, decoded %#v", r.Format(f), e, got)
					}
				}
			}
		}
	}
}

// decodeOne decodes one NFTA_LIST_ELEM with the netlink library.
func decodeOne(f Family, b []byte) (expr.Any, error) {
	outer := attrs(b)
	if len(outer) != 1 {
		return nil, fmt.Errorf("%d list elements", len(outer))
	}
	var name string
	var data []byte
	for _, a := range attrs(outer[0].data) {
		switch a.typ {
		case unix.NFTA_EXPR_NAME:
			name = cstring(a.data)
		case unix.NFTA_EXPR_DATA:
			data = a.data
		}
	}
	var e expr.Any
	switch name {
	case "payload":
		e = &expr.Payload{}
	case "cmp":
		e = &expr.Cmp{}
	case "bitwise":
		e = &expr.Bitwise{}
	case "lookup":
		e = &expr.Lookup{}
	case "meta":
		e = &expr.Meta{}
	case "fib":
		e = &expr.Fib{}
	case "ct":
		e = &expr.Ct{}
	case "numgen":
		e = &expr.Numgen{}
	case "nat":
		e = &expr.NAT{}
	case "masq":
		e = &expr.Masq{}
	case "reject":
		e = &expr.Reject{}
	case "dynset":
		e = &expr.Dynset{}
	case "immediate":
		// A verdict is an immediate into the verdict register.
		for _, a := range attrs(data) {
			if a.typ == unix.NFTA_IMMEDIATE_DREG && be32(a.data) == unix.NFT_REG_VERDICT {
				e = &expr.Verdict{}
			}
		}
		if e == nil {
			e = &expr.Immediate{}
		}
	default:
		return nil, fmt.Errorf("unknown expression %q", name)
	}
	return e, expr.Unmarshal(byte(f), data, e)
}
