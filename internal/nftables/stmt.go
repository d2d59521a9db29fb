// Package nftables is svcnet's one way to program nf_tables: a small rule
// language (the statements kube-proxy's nftables layout is made of),
// printed in nft's syntax for people and golden files, compiled to
// netlink expressions, and read back from the kernel; transactions sent
// straight over netlink as one batch, without the nft binary (which
// re-reads the whole table for every run); and a reader that lists a table
// into the same language. The proxy's nftables mode and its tracer use it.
package nftables

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Family is a table's address family.
type Family uint8

// The families svcnet writes (NFPROTO_IPV4 and NFPROTO_IPV6).
const (
	IPv4 Family = 2
	IPv6 Family = 10
)

func (f Family) String() string {
	if f == IPv6 {
		return "ip6"
	}
	return "ip"
}

// addrLen is the length of an address of the family.
func (f Family) addrLen() int {
	if f == IPv6 {
		return 16
	}
	return 4
}

// Proto is a layer-4 protocol number.
type Proto uint8

// The protocols Services use, and ICMP's two, which carry refusals.
const (
	ICMP   Proto = 1
	TCP    Proto = 6
	UDP    Proto = 17
	ICMPv6 Proto = 58
	SCTP   Proto = 132
)

func (p Proto) String() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case SCTP:
		return "sctp"
	case ICMP:
		return "icmp"
	case ICMPv6:
		return "ipv6-icmp"
	}
	return strconv.Itoa(int(p))
}

// ParseProto reads a protocol name as Kubernetes or nft spell it.
func ParseProto(s string) (Proto, error) {
	switch strings.ToLower(s) {
	case "tcp":
		return TCP, nil
	case "udp":
		return UDP, nil
	case "sctp":
		return SCTP, nil
	}
	return 0, fmt.Errorf("unknown protocol %q", s)
}

// Stmt is one statement of a rule. A rule's statements run in order; a
// match that fails ends the rule.
type Stmt interface {
	// nft prints the statement as nft writes it, for the family.
	nft(f Family) string
}

// MatchAddr matches the source or destination address against a prefix
// (a single address is a full-length prefix): `ip saddr != 10.0.0.0/8`.
type MatchAddr struct {
	Src, Neg bool
	Prefix   netip.Prefix
}

// MatchAddrSet matches an address against a named set: `ip saddr @set`.
type MatchAddrSet struct {
	Src, Neg bool
	Set      string
}

// MatchAddrList matches an address against a literal list of prefixes:
// `ip saddr != { 203.0.113.0/25, 10.0.0.1 }`.
type MatchAddrList struct {
	Src, Neg bool
	Prefixes []netip.Prefix
}

// MatchProto matches the layer-4 protocol: `meta l4proto tcp`.
type MatchProto struct{ Proto Proto }

// MatchDport matches the transport destination port: `th dport 80`.
type MatchDport struct{ Port uint16 }

// MatchSport matches the transport source port: `th sport 8080`.
type MatchSport struct{ Port uint16 }

// MatchFibLocal matches packets whose source or destination address is
// one of the node's: `fib saddr type local`.
type MatchFibLocal struct{ Src, Neg bool }

// MatchCtNew matches the first packet of a connection: `ct state new`.
type MatchCtNew struct{}

// MatchTCPSyn matches a TCP connection's opening segment, a SYN without
// ACK, from its header alone (no conntrack): `tcp flags syn / syn,ack`
// (`tcp flags & (syn | ack) == syn`). A rule that uses it must match the
// protocol first (MatchProto).
type MatchTCPSyn struct{}

// MatchTCPRefusal matches the reset with which TCP refuses a connection
// (no socket listens at its port): it answers a SYN, which carries no
// acknowledgement, so it has flags RST and ACK alone and sequence number
// 0 (RFC 9293, 3.10.7.1), from its header alone:
// `tcp flags rst,ack / fin,syn,rst,ack tcp sequence 0`. A reset that
// ends an established connection carries the connection's sequence
// number instead. A rule that uses it must match the protocol first.
type MatchTCPRefusal struct{}

// MatchPortUnreachable matches an ICMP (ICMPv6 in ip6 tables)
// destination-unreachable message of code port-unreachable, with which a
// host refuses a UDP datagram no socket takes:
// `icmp type destination-unreachable icmp code port-unreachable`. A rule
// that uses it must match the protocol (ICMP or ICMPv6) first.
type MatchPortUnreachable struct{}

// MatchMarkSet matches packets whose mark has any of Mark's bits:
// `meta mark & 0x00004000 != 0x00000000`.
type MatchMarkSet struct{ Mark uint32 }

// MatchCtStatusDNAT matches packets of a connection whose destination
// was translated: `ct status dnat`.
type MatchCtStatusDNAT struct{}

// MatchConnSet matches a packet's addresses, protocol and destination
// port against a set keyed by KeyConn:
// `ip saddr . ip daddr . meta l4proto . th dport @set`.
type MatchConnSet struct{ Set string }

// SetMark sets (Or) or toggles (Xor) bits of the packet mark:
// `meta mark set meta mark | 0x4000`.
type SetMark struct {
	Xor  bool
	Mark uint32
}

// VmapLookup dispatches through a verdict map keyed by
// [address .] protocol . destination port:
// `ip daddr . meta l4proto . th dport vmap @service-ips`.
type VmapLookup struct {
	// Daddr puts the destination address first in the key.
	Daddr bool
	Map   string
}

// Numgen picks one of Targets at random, each with probability
// 1/len(Targets), and goes to it:
// `numgen random mod 2 vmap { 0 : goto a, 1 : goto b }`.
type Numgen struct{ Targets []string }

// DNATMap picks one of To at random, each with probability 1/len(To),
// and rewrites the destination to it through an anonymous data map:
// `dnat ip to numgen random mod 2 map { 0 : 10.0.0.1 . 80, 1 : 10.0.0.2 . 80 }`.
// Unlike a verdict map (Numgen), a data map refers to no chain, so the
// kernel's loop check never walks it. A rule that DNATs must match the
// protocol first (MatchProto).
type DNATMap struct{ To []netip.AddrPort }

// UpdateSrcSet adds the source address to a dynamic set, or refreshes
// its timeout: `update @set { ip saddr }`.
type UpdateSrcSet struct{ Set string }

// DNAT rewrites the destination: `dnat to 10.0.0.1:80`. A rule that
// DNATs must match the protocol first (MatchProto).
type DNAT struct{ To netip.AddrPort }

// Masquerade rewrites the source to the outgoing interface's address.
type Masquerade struct{ FullyRandom bool }

// Reject answers with ICMP port unreachable (ICMPv6 in ip6 tables).
type Reject struct{}

// VerdictKind says where a rule sends a packet.
type VerdictKind uint8

// Verdicts.
const (
	Accept VerdictKind = iota + 1
	Drop
	Return
	Jump
	Goto
)

// Verdict ends a rule: accept, drop, return, or jump/goto Chain.
type Verdict struct {
	Kind  VerdictKind
	Chain string
}

func (v Verdict) String() string {
	switch v.Kind {
	case Accept:
		return "accept"
	case Drop:
		return "drop"
	case Return:
		return "return"
	case Jump:
		return "jump " + v.Chain
	case Goto:
		return "goto " + v.Chain
	}
	return "verdict?"
}

func addrField(f Family, src bool) string {
	if src {
		return f.String() + " saddr"
	}
	return f.String() + " daddr"
}

func neg(n bool) string {
	if n {
		return " !="
	}
	return ""
}

// prefixString prints a full-length prefix as a bare address, as nft does.
func prefixString(p netip.Prefix) string {
	if p.Bits() == p.Addr().BitLen() {
		return p.Addr().String()
	}
	return p.Masked().String()
}

func (s MatchAddr) nft(f Family) string {
	return addrField(f, s.Src) + neg(s.Neg) + " " + prefixString(s.Prefix)
}

func (s MatchAddrSet) nft(f Family) string {
	return addrField(f, s.Src) + neg(s.Neg) + " @" + s.Set
}

func (s MatchAddrList) nft(f Family) string {
	out := make([]string, len(s.Prefixes))
	for i, p := range s.Prefixes {
		out[i] = prefixString(p)
	}
	return addrField(f, s.Src) + neg(s.Neg) + " { " + strings.Join(out, ", ") + " }"
}

func (s MatchProto) nft(Family) string { return "meta l4proto " + s.Proto.String() }
func (s MatchDport) nft(Family) string { return "th dport " + strconv.Itoa(int(s.Port)) }
func (s MatchSport) nft(Family) string { return "th sport " + strconv.Itoa(int(s.Port)) }

func (s MatchFibLocal) nft(Family) string {
	field := "daddr"
	if s.Src {
		field = "saddr"
	}
	return "fib " + field + " type" + neg(s.Neg) + " local"
}

func (MatchCtNew) nft(Family) string  { return "ct state new" }
func (MatchTCPSyn) nft(Family) string { return "tcp flags syn / syn,ack" }
func (MatchTCPRefusal) nft(Family) string {
	return "tcp flags rst,ack / fin,syn,rst,ack tcp sequence 0"
}

func (MatchPortUnreachable) nft(f Family) string {
	if f == IPv6 {
		return "icmpv6 type destination-unreachable icmpv6 code port-unreachable"
	}
	return "icmp type destination-unreachable icmp code port-unreachable"
}

func (s MatchMarkSet) nft(Family) string {
	return fmt.Sprintf("meta mark & %#08x != 0x00000000", s.Mark)
}

func (MatchCtStatusDNAT) nft(Family) string { return "ct status dnat" }

func (s MatchConnSet) nft(f Family) string {
	return addrField(f, true) + " . " + addrField(f, false) + " . meta l4proto . th dport @" + s.Set
}

func (s SetMark) nft(Family) string {
	op := "|"
	if s.Xor {
		op = "^"
	}
	return fmt.Sprintf("meta mark set meta mark %s %#08x", op, s.Mark)
}

func (s VmapLookup) nft(f Family) string {
	key := "meta l4proto . th dport"
	if s.Daddr {
		key = addrField(f, false) + " . " + key
	}
	return key + " vmap @" + s.Map
}

func (s Numgen) nft(Family) string {
	elems := make([]string, len(s.Targets))
	for i, t := range s.Targets {
		elems[i] = strconv.Itoa(i) + " : goto " + t
	}
	return fmt.Sprintf("numgen random mod %d vmap { %s }", len(s.Targets), strings.Join(elems, ", "))
}

func (s DNATMap) nft(f Family) string {
	elems := make([]string, len(s.To))
	for i, a := range s.To {
		elems[i] = strconv.Itoa(i) + " : " + a.Addr().String() + " . " + strconv.Itoa(int(a.Port()))
	}
	return fmt.Sprintf("dnat %s to numgen random mod %d map { %s }", f, len(s.To), strings.Join(elems, ", "))
}

func (s UpdateSrcSet) nft(f Family) string {
	return "update @" + s.Set + " { " + addrField(f, true) + " }"
}

func (s DNAT) nft(Family) string { return "dnat to " + s.To.String() }

func (s Masquerade) nft(Family) string {
	if s.FullyRandom {
		return "masquerade fully-random"
	}
	return "masquerade"
}

func (Reject) nft(Family) string    { return "reject" }
func (v Verdict) nft(Family) string { return v.String() }

// Rule is a list of statements and an optional comment.
type Rule struct {
	Stmts   []Stmt
	Comment string
}

// R builds a rule.
func R(stmts ...Stmt) Rule { return Rule{Stmts: stmts} }

// WithComment returns r with a comment.
func (r Rule) WithComment(c string) Rule {
	r.Comment = c
	return r
}

// Format prints the rule in nft's syntax.
func (r Rule) Format(f Family) string {
	parts := make([]string, 0, len(r.Stmts)+1)
	for _, s := range r.Stmts {
		parts = append(parts, s.nft(f))
	}
	if r.Comment != "" {
		parts = append(parts, "comment "+strconv.Quote(r.Comment))
	}
	return strings.Join(parts, " ")
}

// Equal says whether two rules are the same.
func (r Rule) Equal(o Rule) bool {
	if r.Comment != o.Comment || len(r.Stmts) != len(o.Stmts) {
		return false
	}
	for i, s := range r.Stmts {
		if !stmtEqual(s, o.Stmts[i]) {
			return false
		}
	}
	return true
}

// RulesEqual says whether two rule lists are the same.
func RulesEqual(a, b []Rule) bool {
	return slices.EqualFunc(a, b, Rule.Equal)
}

func stmtEqual(a, b Stmt) bool {
	switch a := a.(type) {
	case MatchAddrList:
		b, ok := b.(MatchAddrList)
		return ok && a.Src == b.Src && a.Neg == b.Neg && slices.Equal(a.Prefixes, b.Prefixes)
	case Numgen:
		b, ok := b.(Numgen)
		return ok && slices.Equal(a.Targets, b.Targets)
	case DNATMap:
		b, ok := b.(DNATMap)
		return ok && slices.Equal(a.To, b.To)
	}
	return a == b // every other statement is a comparable struct
}

// Target is the chain a rule's verdict jumps or goes to, "" if none.
func (r Rule) Target() string {
	if len(r.Stmts) == 0 {
		return ""
	}
	if v, ok := r.Stmts[len(r.Stmts)-1].(Verdict); ok && (v.Kind == Jump || v.Kind == Goto) {
		return v.Chain
	}
	return ""
}
