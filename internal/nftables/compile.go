package nftables

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Registers, as nft numbers them: reg 1 is 16 bytes wide and overlaps the
// 4-byte registers 8 to 11, where concatenated keys are loaded piece by
// piece.
const (
	reg1   = unix.NFT_REG_1
	reg2   = unix.NFT_REG_2
	reg32_ = unix.NFT_REG32_00
)

// rtnLocal is RTN_LOCAL, the fib address type of the node's own addresses.
const rtnLocal = 2

// ctStateNew is the ct state bit of a connection's first packet.
const ctStateNew = 8

// ctStatusDNAT is the ct status bit of a connection whose destination
// was translated (IPS_DST_NAT).
const ctStatusDNAT = 0x20

// The TCP header's sequence number and flags byte, and four of its bits.
const (
	tcpSeqOffset   = 4
	tcpFlagsOffset = 13
	tcpFin         = 0x01
	tcpSyn         = 0x02
	tcpRst         = 0x04
	tcpAck         = 0x10
)

// The type and code of the ICMP and ICMPv6 messages that say a port is
// unreachable (RFC 792, RFC 4443).
var (
	icmpPortUnreachable   = [2]byte{3, 3}
	icmpv6PortUnreachable = [2]byte{1, 4}
)

// portUnreachable is the family's type and code of that message.
func portUnreachable(f Family) [2]byte {
	if f == IPv6 {
		return icmpv6PortUnreachable
	}
	return icmpPortUnreachable
}

// anonSet is a constant set or map that belongs to one rule (the targets
// of a numgen, the prefixes of a MatchAddrList). The transaction creates
// it just before the rule, which refers to it by ID.
type anonSet struct {
	id       uint32
	name     string
	isMap    bool
	interval bool
	keyType  uint32
	keyLen   uint32
	// dataType and dataLen make a map a data map (verdicts otherwise).
	dataType uint32
	dataLen  uint32
	elems    []anonElem
}

type anonElem struct {
	key     []byte
	end     bool // interval end
	verdict *Verdict
	data    []byte // a data map's value
	comment string
}

// compiled is a rule's expressions and the anonymous sets they use.
type compiled struct {
	exprs []expr.Any
	anon  []anonSet
}

// compile turns a rule into netlink expressions, in the encodings nft
// itself uses, so that `nft list` prints what Format prints. nextID
// numbers the anonymous sets of a transaction.
func compile(f Family, r Rule, nextID func() uint32) (compiled, error) {
	var c compiled
	for _, s := range r.Stmts {
		if err := c.add(f, s, nextID); err != nil {
			return compiled{}, fmt.Errorf("%s: %w", s.nft(f), err)
		}
	}
	return c, nil
}

// wordReg is the register nft loads the 4-byte word w of a concatenation
// into: a 16-byte register where one starts, a 4-byte one elsewhere.
func wordReg(w uint32) uint32 {
	if w%4 == 0 {
		return reg1 + w/4
	}
	return reg32_ + w
}

func addrOffset(f Family, src bool) uint32 {
	switch {
	case f == IPv6 && src:
		return 8
	case f == IPv6:
		return 24
	case src:
		return 12
	}
	return 16
}

func loadAddr(f Family, src bool, reg uint32) *expr.Payload {
	return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: addrOffset(f, src), Len: uint32(f.addrLen())}
}

func cmpOp(neg bool) expr.CmpOp {
	if neg {
		return expr.CmpOpNeq
	}
	return expr.CmpOpEq
}

func checkFamily(f Family, a netip.Addr) error {
	if a.Is4() != (f == IPv4) {
		return fmt.Errorf("address %s is not of family %s", a, f)
	}
	return nil
}

func (c *compiled) add(f Family, s Stmt, nextID func() uint32) error {
	switch s := s.(type) {
	case MatchAddr:
		if err := checkFamily(f, s.Prefix.Addr()); err != nil {
			return err
		}
		p := s.Prefix.Masked()
		c.exprs = append(c.exprs, loadAddr(f, s.Src, reg1))
		if p.Bits() < p.Addr().BitLen() {
			mask := netip.PrefixFrom(allOnes(f), p.Bits()).Masked().Addr().AsSlice()
			c.exprs = append(c.exprs, &expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: uint32(len(mask)),
				Mask: mask, Xor: make([]byte, len(mask))})
		}
		c.exprs = append(c.exprs, &expr.Cmp{Op: cmpOp(s.Neg), Register: reg1, Data: p.Addr().AsSlice()})
	case MatchAddrSet:
		c.exprs = append(c.exprs, loadAddr(f, s.Src, reg1), &expr.Lookup{SourceRegister: reg1, SetName: s.Set, Invert: s.Neg})
	case MatchAddrList:
		elems, err := intervalElems(f, s.Prefixes)
		if err != nil {
			return err
		}
		set := anonSet{id: nextID(), name: anonName("__set"), interval: true, keyType: addrType(f), keyLen: uint32(f.addrLen()), elems: elems}
		c.anon = append(c.anon, set)
		c.exprs = append(c.exprs, loadAddr(f, s.Src, reg1),
			&expr.Lookup{SourceRegister: reg1, SetName: set.name, SetID: set.id, Invert: s.Neg})
	case MatchProto:
		c.exprs = append(c.exprs, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{byte(s.Proto)}})
	case MatchDport:
		c.exprs = append(c.exprs, &expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: binaryutil.BigEndian.PutUint16(s.Port)})
	case MatchSport:
		c.exprs = append(c.exprs, &expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: binaryutil.BigEndian.PutUint16(s.Port)})
	case MatchFibLocal:
		c.exprs = append(c.exprs, &expr.Fib{Register: reg1, ResultADDRTYPE: true, FlagSADDR: s.Src, FlagDADDR: !s.Src},
			&expr.Cmp{Op: cmpOp(s.Neg), Register: reg1, Data: binaryutil.NativeEndian.PutUint32(rtnLocal)})
	case MatchCtNew:
		c.exprs = append(c.exprs, &expr.Ct{Register: reg1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(ctStateNew), Xor: make([]byte, 4)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: reg1, Data: make([]byte, 4)})
	case MatchTCPSyn:
		c.exprs = append(c.exprs, &expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: tcpFlagsOffset, Len: 1},
			&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 1, Mask: []byte{tcpSyn | tcpAck}, Xor: []byte{0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{tcpSyn}})
	case MatchTCPRefusal:
		c.exprs = append(c.exprs, &expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: tcpFlagsOffset, Len: 1},
			&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 1, Mask: []byte{tcpFin | tcpSyn | tcpRst | tcpAck}, Xor: []byte{0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{tcpRst | tcpAck}},
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: tcpSeqOffset, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: make([]byte, 4)})
	case MatchPortUnreachable:
		tc := portUnreachable(f)
		c.exprs = append(c.exprs, &expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: tc[:1]},
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: 1, Len: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: tc[1:]})
	case MatchMarkSet:
		c.exprs = append(c.exprs, &expr.Meta{Key: expr.MetaKeyMARK, Register: reg1},
			&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(s.Mark), Xor: make([]byte, 4)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: reg1, Data: make([]byte, 4)})
	case MatchCtStatusDNAT:
		c.exprs = append(c.exprs, &expr.Ct{Register: reg1, Key: expr.CtKeySTATUS},
			&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(ctStatusDNAT), Xor: make([]byte, 4)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: reg1, Data: make([]byte, 4)})
	case MatchConnSet:
		// The key's parts go to consecutive 4-byte words, each loaded
		// into the register nft names for that word.
		w := uint32(f.addrLen() / 4)
		c.exprs = append(c.exprs, loadAddr(f, true, wordReg(0)), loadAddr(f, false, wordReg(w)),
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: wordReg(2 * w)},
			&expr.Payload{DestRegister: wordReg(2*w + 1), Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Lookup{SourceRegister: reg1, SetName: s.Set})
	case SetMark:
		mask, xor := ^s.Mark, s.Mark // or: clear the bits, then set them
		if s.Xor {
			mask = 0xffffffff
		}
		c.exprs = append(c.exprs, &expr.Meta{Key: expr.MetaKeyMARK, Register: reg1},
			&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(mask), Xor: binaryutil.NativeEndian.PutUint32(xor)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg1})
	case VmapLookup:
		next := uint32(reg1)
		if s.Daddr {
			c.exprs = append(c.exprs, loadAddr(f, false, reg1))
			next = reg32_ + uint32(f.addrLen()/4)
		}
		dport := next + 1
		if next == reg1 {
			dport = reg32_ + 1
		}
		c.exprs = append(c.exprs, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: next},
			&expr.Payload{DestRegister: dport, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Lookup{SourceRegister: reg1, DestRegister: unix.NFT_REG_VERDICT, IsDestRegSet: true, SetName: s.Map})
	case Numgen:
		if len(s.Targets) == 0 {
			return fmt.Errorf("numgen needs a target")
		}
		set := anonSet{id: nextID(), name: anonName("__map"), isMap: true, keyType: typeInteger, keyLen: 4}
		for i, t := range s.Targets {
			set.elems = append(set.elems, anonElem{key: binaryutil.NativeEndian.PutUint32(uint32(i)), verdict: &Verdict{Kind: Goto, Chain: t}})
		}
		c.anon = append(c.anon, set)
		c.exprs = append(c.exprs, &expr.Numgen{Register: reg1, Modulus: uint32(len(s.Targets)), Type: unix.NFT_NG_RANDOM},
			&expr.Lookup{SourceRegister: reg1, DestRegister: unix.NFT_REG_VERDICT, IsDestRegSet: true, SetName: set.name, SetID: set.id})
	case DNATMap:
		if len(s.To) == 0 {
			return fmt.Errorf("dnat map needs a destination")
		}
		const service = 13 // inet_service
		set := anonSet{id: nextID(), name: anonName("__map"), isMap: true, keyType: typeInteger, keyLen: 4,
			dataType: addrType(f)<<6 | service, dataLen: uint32(f.addrLen()) + 4}
		for i, a := range s.To {
			if err := checkFamily(f, a.Addr()); err != nil {
				return err
			}
			data := binary.BigEndian.AppendUint16(a.Addr().AsSlice(), a.Port())
			set.elems = append(set.elems, anonElem{key: binaryutil.NativeEndian.PutUint32(uint32(i)), data: append(data, 0, 0)})
		}
		c.anon = append(c.anon, set)
		c.exprs = append(c.exprs, &expr.Numgen{Register: reg1, Modulus: uint32(len(s.To)), Type: unix.NFT_NG_RANDOM},
			&expr.Lookup{SourceRegister: reg1, DestRegister: reg1, IsDestRegSet: true, SetName: set.name, SetID: set.id},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: uint32(f), RegAddrMin: reg1, RegProtoMin: wordReg(uint32(f.addrLen() / 4))})
	case UpdateSrcSet:
		c.exprs = append(c.exprs, loadAddr(f, true, reg1), &expr.Dynset{SrcRegKey: reg1, SetName: s.Set, Operation: unix.NFT_DYNSET_OP_UPDATE})
	case DNAT:
		if err := checkFamily(f, s.To.Addr()); err != nil {
			return err
		}
		c.exprs = append(c.exprs, &expr.Immediate{Register: reg1, Data: s.To.Addr().AsSlice()},
			&expr.Immediate{Register: reg2, Data: binaryutil.BigEndian.PutUint16(s.To.Port())},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: uint32(f), RegAddrMin: reg1, RegProtoMin: reg2, Specified: true})
	case Masquerade:
		c.exprs = append(c.exprs, &expr.Masq{FullyRandom: s.FullyRandom})
	case Reject:
		code := uint8(3) // ICMP_PORT_UNREACH
		if f == IPv6 {
			code = 4 // ICMPV6_PORT_UNREACH
		}
		c.exprs = append(c.exprs, &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: code})
	case Verdict:
		v, err := verdictExpr(s)
		if err != nil {
			return err
		}
		c.exprs = append(c.exprs, v)
	default:
		return fmt.Errorf("statement %T cannot be compiled", s)
	}
	return nil
}

// anonSeq numbers anonymous sets. nft names them "__map%d" and lets the
// kernel pick the number, which costs a scan of every set of the table
// with sscanf per new set: quadratic, minutes for the 10,000 numgen maps
// of 10,000 Services. Naming them ourselves leaves the kernel's cheaper
// uniqueness check. The random start keeps a restarted proxy's names
// clear of its predecessor's.
var anonSeq atomic.Uint64

func init() { anonSeq.Store(rand.Uint64() >> 16) }

func anonName(prefix string) string {
	return prefix + strconv.FormatUint(anonSeq.Add(1), 36)
}

// typeInteger is nft's integer datatype, the key of numgen's maps.
const typeInteger = 4

func addrType(f Family) uint32 {
	if f == IPv6 {
		return 8 // ipv6_addr
	}
	return 7 // ipv4_addr
}

func allOnes(f Family) netip.Addr {
	if f == IPv6 {
		return netip.AddrFrom16([16]byte{0: 0xff, 1: 0xff, 2: 0xff, 3: 0xff, 4: 0xff, 5: 0xff, 6: 0xff, 7: 0xff, 8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff, 12: 0xff, 13: 0xff, 14: 0xff, 15: 0xff})
	}
	return netip.AddrFrom4([4]byte{0xff, 0xff, 0xff, 0xff})
}

func verdictExpr(v Verdict) (*expr.Verdict, error) {
	switch v.Kind {
	case Accept:
		return &expr.Verdict{Kind: expr.VerdictAccept}, nil
	case Drop:
		return &expr.Verdict{Kind: expr.VerdictDrop}, nil
	case Return:
		return &expr.Verdict{Kind: expr.VerdictReturn}, nil
	case Jump, Goto:
		if v.Chain == "" {
			return nil, fmt.Errorf("%s without a chain", v)
		}
		k := expr.VerdictJump
		if v.Kind == Goto {
			k = expr.VerdictGoto
		}
		return &expr.Verdict{Kind: k, Chain: v.Chain}, nil
	}
	return nil, fmt.Errorf("unknown verdict %d", v.Kind)
}

// intervalElems encodes prefixes as an interval set the way nft does:
// merged, sorted ranges, each a start and an end (the first address past
// it) flagged as such, after an end at address zero when the first range
// does not start there.
func intervalElems(f Family, prefixes []netip.Prefix) ([]anonElem, error) {
	type rng struct{ lo, hi []byte } // hi exclusive; nil: to the end
	var ranges []rng
	for _, p := range prefixes {
		if err := checkFamily(f, p.Addr()); err != nil {
			return nil, err
		}
		p = p.Masked()
		lo := p.Addr().AsSlice()
		hi := slices.Clone(lo)
		hostBits := p.Addr().BitLen() - p.Bits()
		for i := len(hi) - 1; i >= 0 && hostBits > 0; i-- {
			n := min(hostBits, 8)
			hi[i] |= byte(1<<n - 1)
			hostBits -= n
		}
		ranges = append(ranges, rng{lo, increment(hi)})
	}
	slices.SortFunc(ranges, func(a, b rng) int { return compareBytes(a.lo, b.lo) })
	var merged []rng
	for _, r := range ranges {
		if n := len(merged); n > 0 && (merged[n-1].hi == nil || compareBytes(r.lo, merged[n-1].hi) <= 0) {
			if merged[n-1].hi != nil && (r.hi == nil || compareBytes(r.hi, merged[n-1].hi) > 0) {
				merged[n-1].hi = r.hi
			}
			continue
		}
		merged = append(merged, r)
	}
	var out []anonElem
	zero := make([]byte, f.addrLen())
	if len(merged) > 0 && compareBytes(merged[0].lo, zero) != 0 {
		out = append(out, anonElem{key: zero, end: true})
	}
	for _, r := range merged {
		out = append(out, anonElem{key: r.lo})
		if r.hi != nil {
			out = append(out, anonElem{key: r.hi, end: true})
		}
	}
	return out, nil
}

// increment returns b+1 as a big-endian number, nil on overflow.
func increment(b []byte) []byte {
	out := slices.Clone(b)
	for i := len(out) - 1; i >= 0; i-- {
		out[i]++
		if out[i] != 0 {
			return out
		}
	}
	return nil
}

func compareBytes(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// encodeKey lays out a key as the kernel compares it: each part in
// network order, padded to a multiple of 4 bytes.
func encodeKey(f Family, t KeyType, k Key) ([]byte, error) {
	var out []byte
	addrs := []netip.Addr{k.Addr}
	switch t {
	case KeyProtoPort:
		addrs = nil
	case KeyConn:
		addrs = append(addrs, k.Addr2)
	}
	for _, a := range addrs {
		if !a.IsValid() {
			return nil, fmt.Errorf("key without an address")
		}
		if err := checkFamily(f, a); err != nil {
			return nil, err
		}
		out = append(out, a.AsSlice()...)
	}
	if t != KeyAddr {
		out = append(out, byte(k.Proto), 0, 0, 0)
		out = binary.BigEndian.AppendUint16(out, k.Port)
		out = append(out, 0, 0)
	}
	return out, nil
}

// keyMagic is the key's nft datatype: concatenations pack their parts'
// types 6 bits each.
func (t KeyType) magic(f Family) (typ, length uint32) {
	const proto, service = 12, 13
	switch t {
	case KeyAddr:
		return addrType(f), uint32(f.addrLen())
	case KeyProtoPort:
		return proto<<6 | service, 8
	case KeyConn:
		return ((addrType(f)<<6|addrType(f))<<6|proto)<<6 | service, 2*uint32(f.addrLen()) + 8
	}
	return (addrType(f)<<6|proto)<<6 | service, uint32(f.addrLen()) + 8
}
