package allocator

import (
	"fmt"
	"math/big"
	"net/netip"
	"strconv"
	"strings"
)

// maxRangeSize bounds the bitmap of huge (IPv6) ranges.
const maxRangeSize = 1 << 20

// IPRange allocates addresses of a CIDR, never its network or (for IPv4)
// broadcast address.
type IPRange struct {
	prefix netip.Prefix
	first  netip.Addr // offset 0
	*Bitmap
}

// NewIPRange returns an allocator over cidr, e.g. "10.96.0.0/12".
func NewIPRange(cidr string) (*IPRange, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, fmt.Errorf("invalid service IP range %q: %w", cidr, err)
	}
	p = p.Masked()
	hostBits := p.Addr().BitLen() - p.Bits()
	if hostBits < 2 {
		return nil, fmt.Errorf("service IP range %s is too small", cidr)
	}
	size := maxRangeSize
	if hostBits < 21 {
		size = 1<<hostBits - 1 // without the network address
		if p.Addr().Is4() {
			size-- // and without broadcast
		}
	}
	return &IPRange{prefix: p, first: p.Addr().Next(), Bitmap: NewBitmap(size)}, nil
}

// Prefix is the range as a CIDR.
func (r *IPRange) Prefix() netip.Prefix { return r.prefix }

// Contains reports whether ip is an allocatable address of the range.
func (r *IPRange) Contains(ip netip.Addr) bool {
	_, ok := r.offset(ip)
	return ok
}

func (r *IPRange) offset(ip netip.Addr) (int, bool) {
	if !r.prefix.Contains(ip) {
		return 0, false
	}
	d := new(big.Int).Sub(new(big.Int).SetBytes(ip.AsSlice()), new(big.Int).SetBytes(r.first.AsSlice()))
	if d.Sign() < 0 || !d.IsInt64() || d.Int64() >= int64(r.Size()) {
		return 0, false
	}
	return int(d.Int64()), true
}

func (r *IPRange) addr(offset int) netip.Addr {
	n := new(big.Int).Add(new(big.Int).SetBytes(r.first.AsSlice()), big.NewInt(int64(offset)))
	b := make([]byte, r.first.BitLen()/8)
	n.FillBytes(b)
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Offset is ip's offset in the range, for Bitmap.Reset.
func (r *IPRange) Offset(ip netip.Addr) (int, bool) { return r.offset(ip) }

// Nth is the n-th allocatable address (0-based), e.g. Nth(9) is the ".10"
// address kube-dns uses.
func (r *IPRange) Nth(n int) netip.Addr { return r.addr(n) }

// CheckIP reports whether ip may be allocated from the range at all.
func (r *IPRange) CheckIP(ip netip.Addr) error {
	if _, ok := r.offset(ip); !ok {
		return fmt.Errorf("the provided IP (%s) is not in the valid range. The range of valid IPs is %s", ip, r.prefix)
	}
	return nil
}

// AllocateIP marks ip as used.
func (r *IPRange) AllocateIP(ip netip.Addr) error {
	off, ok := r.offset(ip)
	if !ok {
		return fmt.Errorf("the provided IP (%s) is not in the valid range. The range of valid IPs is %s", ip, r.prefix)
	}
	if err := r.Allocate(off); err != nil {
		return fmt.Errorf("the provided IP (%s) is already allocated", ip)
	}
	return nil
}

// AllocateNextIP returns a free address and marks it as used.
func (r *IPRange) AllocateNextIP() (netip.Addr, error) {
	off, err := r.AllocateNext()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("no IP addresses left in range %s: %w", r.prefix, err)
	}
	return r.addr(off), nil
}

// ReleaseIP frees ip; addresses outside the range are ignored.
func (r *IPRange) ReleaseIP(ip netip.Addr) {
	if off, ok := r.offset(ip); ok {
		r.Release(off)
	}
}

// HasIP reports whether ip is allocated.
func (r *IPRange) HasIP(ip netip.Addr) bool {
	off, ok := r.offset(ip)
	return ok && r.Has(off)
}

// PortRange allocates ports of [base, base+size).
type PortRange struct {
	base int
	*Bitmap
}

// ParsePortRange parses "30000-32767" (or a single port "8477").
func ParsePortRange(s string) (base, size int, err error) {
	loS, hiS, isRange := strings.Cut(strings.TrimSpace(s), "-")
	if !isRange {
		hiS = loS
	}
	lo, err1 := strconv.Atoi(loS)
	hi, err2 := strconv.Atoi(hiS)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("invalid port range %q: want MIN-MAX, e.g. 30000-32767", s)
	}
	if lo < 1 || hi > 65535 || lo > hi {
		return 0, 0, fmt.Errorf("invalid port range %q: ports must be 1-65535 and MIN <= MAX", s)
	}
	return lo, hi - lo + 1, nil
}

// NewPortRange returns an allocator over "MIN-MAX".
func NewPortRange(s string) (*PortRange, error) {
	base, size, err := ParsePortRange(s)
	if err != nil {
		return nil, err
	}
	return &PortRange{base: base, Bitmap: NewBitmap(size)}, nil
}

// Base is the range's first port.
func (r *PortRange) Base() int { return r.base }

// Empty returns an allocator over the same range with nothing allocated.
func (r *PortRange) Empty() *PortRange {
	return &PortRange{base: r.base, Bitmap: NewBitmap(r.Size())}
}

// String is the range as "MIN-MAX".
func (r *PortRange) String() string { return fmt.Sprintf("%d-%d", r.base, r.base+r.Size()-1) }

// Contains reports whether port is in the range.
func (r *PortRange) Contains(port int) bool { return port >= r.base && port < r.base+r.Size() }

// AllocatePort marks port as used.
func (r *PortRange) AllocatePort(port int) error {
	if !r.Contains(port) {
		return fmt.Errorf("provided port is not in the valid range. The range of valid ports is %s", r)
	}
	if err := r.Allocate(port - r.base); err != nil {
		return fmt.Errorf("provided port is already allocated")
	}
	return nil
}

// AllocateNextPort returns a free port and marks it as used.
func (r *PortRange) AllocateNextPort() (int, error) {
	off, err := r.AllocateNext()
	if err != nil {
		return 0, fmt.Errorf("no ports left in range %s: %w", r, err)
	}
	return r.base + off, nil
}

// ReleasePort frees port; ports outside the range are ignored.
func (r *PortRange) ReleasePort(port int) {
	if r.Contains(port) {
		r.Release(port - r.base)
	}
}

// HasPort reports whether port is allocated.
func (r *PortRange) HasPort(port int) bool { return r.Contains(port) && r.Has(port-r.base) }
