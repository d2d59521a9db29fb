package nftables

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// anonReader returns the elements of an anonymous set a rule refers to.
type anonReader func(name string) ([]anonElem, error)

// decode turns a rule's expressions back into statements. It knows the
// encodings compile writes and the shorter ones nft writes for the same
// statements (a prefix on a byte boundary loads fewer bytes), so it reads
// tables that kube-proxy itself wrote too.
func decode(f Family, exprs []expr.Any, anon anonReader) ([]Stmt, error) {
	d := decoder{f: f, e: exprs, anon: anon}
	for d.i < len(d.e) {
		if err := d.next(); err != nil {
			return nil, fmt.Errorf("expression %d (%T): %w", d.i, d.e[d.i], err)
		}
	}
	return d.out, nil
}

type decoder struct {
	f    Family
	e    []expr.Any
	i    int
	out  []Stmt
	anon anonReader
}

func (d *decoder) peek(k int) expr.Any {
	if d.i+k < len(d.e) {
		return d.e[d.i+k]
	}
	return nil
}

func (d *decoder) emit(n int, s Stmt) error {
	d.i += n
	d.out = append(d.out, s)
	return nil
}

var errUnknown = fmt.Errorf("not a statement svcnet knows")

func (d *decoder) next() error {
	switch e := d.peek(0).(type) {
	case *expr.Payload:
		if e.Base == expr.PayloadBaseTransportHeader && e.Offset == 2 && e.Len == 2 {
			if c, ok := d.peek(1).(*expr.Cmp); ok && c.Op == expr.CmpOpEq && len(c.Data) == 2 {
				return d.emit(2, MatchDport{Port: binary.BigEndian.Uint16(c.Data)})
			}
			return errUnknown
		}
		if e.Base == expr.PayloadBaseTransportHeader && e.Offset == 0 && e.Len == 2 {
			if c, ok := d.peek(1).(*expr.Cmp); ok && c.Op == expr.CmpOpEq && len(c.Data) == 2 {
				return d.emit(2, MatchSport{Port: binary.BigEndian.Uint16(c.Data)})
			}
			return errUnknown
		}
		if e.Base == expr.PayloadBaseTransportHeader && e.Offset == tcpFlagsOffset && e.Len == 1 {
			b, ok1 := d.peek(1).(*expr.Bitwise)
			c, ok2 := d.peek(2).(*expr.Cmp)
			if !ok1 || !ok2 || !isZero(b.Xor) || c.Op != expr.CmpOpEq {
				return errUnknown
			}
			if slices.Equal(b.Mask, []byte{tcpSyn | tcpAck}) && slices.Equal(c.Data, []byte{tcpSyn}) {
				return d.emit(3, MatchTCPSyn{})
			}
			s, ok3 := d.peek(3).(*expr.Payload)
			z, ok4 := d.peek(4).(*expr.Cmp)
			if slices.Equal(b.Mask, []byte{tcpFin | tcpSyn | tcpRst | tcpAck}) && slices.Equal(c.Data, []byte{tcpRst | tcpAck}) &&
				ok3 && ok4 && s.Base == expr.PayloadBaseTransportHeader && s.Offset == tcpSeqOffset && s.Len == 4 &&
				z.Op == expr.CmpOpEq && len(z.Data) == 4 && isZero(z.Data) {
				return d.emit(5, MatchTCPRefusal{})
			}
			return errUnknown
		}
		if e.Base == expr.PayloadBaseTransportHeader && e.Offset == 0 && e.Len == 1 {
			tc := portUnreachable(d.f)
			c1, ok1 := d.peek(1).(*expr.Cmp)
			p2, ok2 := d.peek(2).(*expr.Payload)
			c2, ok3 := d.peek(3).(*expr.Cmp)
			if ok1 && ok2 && ok3 && c1.Op == expr.CmpOpEq && slices.Equal(c1.Data, tc[:1]) &&
				p2.Base == expr.PayloadBaseTransportHeader && p2.Offset == 1 && p2.Len == 1 &&
				c2.Op == expr.CmpOpEq && slices.Equal(c2.Data, tc[1:]) {
				return d.emit(4, MatchPortUnreachable{})
			}
			return errUnknown
		}
		return d.addr(e)
	case *expr.Meta:
		return d.meta(e)
	case *expr.Fib:
		c, ok := d.peek(1).(*expr.Cmp)
		if !ok || !e.ResultADDRTYPE || len(c.Data) != 4 || binary.NativeEndian.Uint32(c.Data) != rtnLocal {
			return errUnknown
		}
		return d.emit(2, MatchFibLocal{Src: e.FlagSADDR, Neg: c.Op == expr.CmpOpNeq})
	case *expr.Ct:
		b, ok1 := d.peek(1).(*expr.Bitwise)
		c, ok2 := d.peek(2).(*expr.Cmp)
		if !ok1 || !ok2 || len(b.Mask) != 4 || c.Op != expr.CmpOpNeq || !isZero(c.Data) {
			return errUnknown
		}
		switch mask := binary.NativeEndian.Uint32(b.Mask); {
		case e.Key == expr.CtKeySTATE && mask == ctStateNew:
			return d.emit(3, MatchCtNew{})
		case e.Key == expr.CtKeySTATUS && mask == ctStatusDNAT:
			return d.emit(3, MatchCtStatusDNAT{})
		}
		return errUnknown
	case *expr.Numgen:
		l, ok := d.peek(1).(*expr.Lookup)
		if !ok || e.Type != unix.NFT_NG_RANDOM || !l.IsDestRegSet {
			return errUnknown
		}
		if l.DestRegister != unix.NFT_REG_VERDICT {
			return d.dnatMap(e, l)
		}
		elems, err := d.anon(l.SetName)
		if err != nil {
			return err
		}
		targets := make([]string, e.Modulus)
		for _, el := range elems {
			if len(el.key) != 4 || el.verdict == nil {
				return fmt.Errorf("numgen map %s: bad element", l.SetName)
			}
			i := binary.NativeEndian.Uint32(el.key)
			if i >= e.Modulus {
				return fmt.Errorf("numgen map %s: element %d past mod %d", l.SetName, i, e.Modulus)
			}
			targets[i] = el.verdict.Chain
		}
		if slices.Contains(targets, "") {
			return fmt.Errorf("numgen map %s: a number goes nowhere", l.SetName)
		}
		return d.emit(2, Numgen{Targets: targets})
	case *expr.Immediate:
		i2, ok1 := d.peek(1).(*expr.Immediate)
		n, ok2 := d.peek(2).(*expr.NAT)
		if !ok1 || !ok2 || n.Type != expr.NATTypeDestNAT || len(i2.Data) != 2 {
			return errUnknown
		}
		a, ok := netip.AddrFromSlice(e.Data)
		if !ok {
			return errUnknown
		}
		return d.emit(3, DNAT{To: netip.AddrPortFrom(a, binary.BigEndian.Uint16(i2.Data))})
	case *expr.Masq:
		return d.emit(1, Masquerade{FullyRandom: e.FullyRandom})
	case *expr.Reject:
		return d.emit(1, Reject{})
	case *expr.Verdict:
		v := Verdict{Chain: e.Chain}
		switch e.Kind {
		case expr.VerdictAccept:
			v.Kind = Accept
		case expr.VerdictDrop:
			v.Kind = Drop
		case expr.VerdictReturn:
			v.Kind = Return
		case expr.VerdictJump:
			v.Kind = Jump
		case expr.VerdictGoto:
			v.Kind = Goto
		default:
			return errUnknown
		}
		return d.emit(1, v)
	case *expr.Counter:
		d.i++ // counters change no packet's fate
		return nil
	}
	return errUnknown
}

// dnatMap decodes a numgen whose number looks up an address and port to
// DNAT to.
func (d *decoder) dnatMap(ng *expr.Numgen, l *expr.Lookup) error {
	n, ok := d.peek(2).(*expr.NAT)
	if !ok || n.Type != expr.NATTypeDestNAT || n.RegAddrMin != l.DestRegister {
		return errUnknown
	}
	elems, err := d.anon(l.SetName)
	if err != nil {
		return err
	}
	to := make([]netip.AddrPort, ng.Modulus)
	for _, el := range elems {
		if len(el.key) != 4 || len(el.data) < d.f.addrLen()+2 {
			return fmt.Errorf("dnat map %s: bad element", l.SetName)
		}
		i := binary.NativeEndian.Uint32(el.key)
		if i >= ng.Modulus {
			return fmt.Errorf("dnat map %s: element %d past mod %d", l.SetName, i, ng.Modulus)
		}
		a, _ := netip.AddrFromSlice(el.data[:d.f.addrLen()])
		to[i] = netip.AddrPortFrom(a, binary.BigEndian.Uint16(el.data[d.f.addrLen():]))
	}
	if slices.ContainsFunc(to, func(a netip.AddrPort) bool { return !a.IsValid() }) {
		return fmt.Errorf("dnat map %s: a number goes nowhere", l.SetName)
	}
	return d.emit(3, DNATMap{To: to})
}

// addr decodes what starts with loading an address.
func (d *decoder) addr(p *expr.Payload) error {
	if p.Base != expr.PayloadBaseNetworkHeader {
		return errUnknown
	}
	var src bool
	switch p.Offset {
	case addrOffset(d.f, true):
		src = true
	case addrOffset(d.f, false):
	default:
		return errUnknown
	}
	full := uint32(d.f.addrLen())
	switch n := d.peek(1).(type) {
	case *expr.Payload: // a connection: saddr . daddr . protocol . port
		m, ok1 := d.peek(2).(*expr.Meta)
		t, ok2 := d.peek(3).(*expr.Payload)
		l, ok3 := d.peek(4).(*expr.Lookup)
		if !src || p.Len != full || n.Base != expr.PayloadBaseNetworkHeader || n.Offset != addrOffset(d.f, false) || n.Len != full ||
			!ok1 || m.Key != expr.MetaKeyL4PROTO || !ok2 || t.Base != expr.PayloadBaseTransportHeader || t.Offset != 2 || t.Len != 2 ||
			!ok3 || l.IsDestRegSet || l.Invert {
			return errUnknown
		}
		return d.emit(5, MatchConnSet{Set: l.SetName})
	case *expr.Meta: // a concatenation: address . protocol . port
		t, ok1 := d.peek(2).(*expr.Payload)
		l, ok2 := d.peek(3).(*expr.Lookup)
		if src || p.Len != full || n.Key != expr.MetaKeyL4PROTO || !ok1 || !ok2 || !l.IsDestRegSet ||
			t.Base != expr.PayloadBaseTransportHeader || t.Offset != 2 || t.Len != 2 {
			return errUnknown
		}
		return d.emit(4, VmapLookup{Daddr: true, Map: l.SetName})
	case *expr.Cmp:
		a, ok := d.prefixAddr(n.Data)
		if !ok || p.Len > full {
			return errUnknown
		}
		return d.emit(2, MatchAddr{Src: src, Neg: n.Op == expr.CmpOpNeq, Prefix: netip.PrefixFrom(a, int(p.Len)*8)})
	case *expr.Bitwise:
		c, ok := d.peek(2).(*expr.Cmp)
		if !ok || p.Len != full || len(n.Mask) != int(full) || !isZero(n.Xor) {
			return errUnknown
		}
		ones := 0
		for _, b := range n.Mask {
			ones += bits.OnesCount8(b)
		}
		a, ok := d.prefixAddr(c.Data)
		if !ok {
			return errUnknown
		}
		return d.emit(3, MatchAddr{Src: src, Neg: c.Op == expr.CmpOpNeq, Prefix: netip.PrefixFrom(a, ones)})
	case *expr.Lookup:
		if n.IsDestRegSet {
			return errUnknown
		}
		if !strings.HasPrefix(n.SetName, "__set") {
			return d.emit(2, MatchAddrSet{Src: src, Neg: n.Invert, Set: n.SetName})
		}
		elems, err := d.anon(n.SetName)
		if err != nil {
			return err
		}
		prefixes, err := prefixesOf(d.f, elems)
		if err != nil {
			return fmt.Errorf("set %s: %w", n.SetName, err)
		}
		return d.emit(2, MatchAddrList{Src: src, Neg: n.Invert, Prefixes: prefixes})
	case *expr.Dynset:
		if !src || n.Operation != unix.NFT_DYNSET_OP_UPDATE {
			return errUnknown
		}
		return d.emit(2, UpdateSrcSet{Set: n.SetName})
	}
	return errUnknown
}

// prefixAddr pads the first bytes of an address to a whole one.
func (d *decoder) prefixAddr(b []byte) (netip.Addr, bool) {
	if len(b) > d.f.addrLen() {
		return netip.Addr{}, false
	}
	full := make([]byte, d.f.addrLen())
	copy(full, b)
	return netip.AddrFromSlice(full)
}

func (d *decoder) meta(m *expr.Meta) error {
	switch m.Key {
	case expr.MetaKeyL4PROTO:
		switch n := d.peek(1).(type) {
		case *expr.Cmp:
			if n.Op != expr.CmpOpEq || len(n.Data) != 1 {
				return errUnknown
			}
			return d.emit(2, MatchProto{Proto: Proto(n.Data[0])})
		case *expr.Payload:
			l, ok := d.peek(2).(*expr.Lookup)
			if !ok || !l.IsDestRegSet || n.Base != expr.PayloadBaseTransportHeader || n.Offset != 2 || n.Len != 2 {
				return errUnknown
			}
			return d.emit(3, VmapLookup{Map: l.SetName})
		}
	case expr.MetaKeyMARK:
		b, ok := d.peek(1).(*expr.Bitwise)
		if m.SourceRegister || !ok || len(b.Mask) != 4 || len(b.Xor) != 4 {
			return errUnknown
		}
		mask, xor := binary.NativeEndian.Uint32(b.Mask), binary.NativeEndian.Uint32(b.Xor)
		switch n := d.peek(2).(type) {
		case *expr.Cmp:
			if xor != 0 || !isZero(n.Data) {
				return errUnknown
			}
			if n.Op != expr.CmpOpNeq {
				return errUnknown
			}
			return d.emit(3, MatchMarkSet{Mark: mask})
		case *expr.Meta:
			if !n.SourceRegister || n.Key != expr.MetaKeyMARK {
				return errUnknown
			}
			if mask == 0xffffffff {
				return d.emit(3, SetMark{Xor: true, Mark: xor})
			}
			if mask != ^xor {
				return errUnknown
			}
			return d.emit(3, SetMark{Mark: xor})
		}
	}
	return errUnknown
}

func isZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// prefixesOf reads an interval set's elements back into prefixes.
func prefixesOf(f Family, elems []anonElem) ([]netip.Prefix, error) {
	slices.SortFunc(elems, func(a, b anonElem) int {
		if c := compareBytes(a.key, b.key); c != 0 {
			return c
		}
		// An end and the next start at one address: the end first.
		if a.end != b.end {
			if a.end {
				return -1
			}
			return 1
		}
		return 0
	})
	var out []netip.Prefix
	for i := 0; i < len(elems); i++ {
		if elems[i].end {
			continue
		}
		lo, ok := netip.AddrFromSlice(elems[i].key)
		if !ok {
			return nil, fmt.Errorf("bad key %x", elems[i].key)
		}
		var hi netip.Addr // last address of the range
		if i+1 < len(elems) && elems[i+1].end {
			past, ok := netip.AddrFromSlice(elems[i+1].key)
			if !ok {
				return nil, fmt.Errorf("bad key %x", elems[i+1].key)
			}
			hi = past.Prev()
			i++
		} else {
			hi = allOnes(f)
		}
		out = append(out, rangePrefixes(lo, hi)...)
	}
	return out, nil
}

// rangePrefixes splits [lo, hi] into the fewest prefixes.
func rangePrefixes(lo, hi netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	for lo.IsValid() && lo.Compare(hi) <= 0 {
		bitsLen := lo.BitLen()
		n := bitsLen
		// Grow the prefix while it starts at lo and stays within hi.
		for n > 0 {
			p := netip.PrefixFrom(lo, n-1)
			if p.Masked().Addr() != lo || lastAddr(p).Compare(hi) > 0 {
				break
			}
			n--
		}
		p := netip.PrefixFrom(lo, n)
		out = append(out, p)
		last := lastAddr(p)
		if last == allOnesLike(lo) {
			break
		}
		lo = last.Next()
	}
	return out
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	host := p.Addr().BitLen() - p.Bits()
	for i := len(b) - 1; i >= 0 && host > 0; i-- {
		n := min(host, 8)
		b[i] |= byte(1<<n - 1)
		host -= n
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func allOnesLike(a netip.Addr) netip.Addr {
	if a.Is4() {
		return allOnes(IPv4)
	}
	return allOnes(IPv6)
}
