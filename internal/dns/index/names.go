package index

import (
	"net/netip"
	"strconv"
	"strings"
)

// DashedIP is the label form of an address used for pod names and for
// headless endpoints without a hostname: 10-0-0-1, 2001-db8--1 (CoreDNS's
// form, so names stay stable when clients move between implementations).
func DashedIP(ip netip.Addr) string {
	return strings.ReplaceAll(strings.ReplaceAll(ip.Unmap().String(), ".", "-"), ":", "-")
}

// ParseDashedIP undoes DashedIP. Four dashes-separated decimals are IPv4;
// anything else is read as IPv6 with dashes for colons.
func ParseDashedIP(label string) (netip.Addr, bool) {
	var s string
	if strings.Count(label, "-") == 3 && !strings.Contains(label, "--") {
		s = strings.ReplaceAll(label, "-", ".")
	} else {
		s = strings.ReplaceAll(label, "-", ":")
	}
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, false
	}
	return ip, true
}

// ReverseName is the in-addr.arpa or ip6.arpa owner of ip's PTR record.
func ReverseName(ip netip.Addr) string {
	ip = ip.Unmap()
	var b strings.Builder
	if ip.Is4() {
		a := ip.As4()
		for i := 3; i >= 0; i-- {
			b.WriteString(strconv.Itoa(int(a[i])))
			b.WriteByte('.')
		}
		b.WriteString("in-addr.arpa.")
		return b.String()
	}
	const hex = "0123456789abcdef"
	a := ip.As16()
	for i := 15; i >= 0; i-- {
		b.WriteByte(hex[a[i]&0xf])
		b.WriteByte('.')
		b.WriteByte(hex[a[i]>>4])
		b.WriteByte('.')
	}
	b.WriteString("ip6.arpa.")
	return b.String()
}

// ParseReverseName reads a complete reverse name (four octets under
// in-addr.arpa, 32 nibbles under ip6.arpa). Partial names are not
// addresses and are reported as such.
func ParseReverseName(name string) (netip.Addr, bool) {
	name = strings.ToLower(name)
	if rest, ok := strings.CutSuffix(name, ".in-addr.arpa."); ok {
		labels := strings.Split(rest, ".")
		if len(labels) != 4 {
			return netip.Addr{}, false
		}
		var a [4]byte
		for i, l := range labels {
			// No leading zeros: 010 would be a second name for one address.
			if l == "" || len(l) > 3 || (len(l) > 1 && l[0] == '0') {
				return netip.Addr{}, false
			}
			n, err := strconv.Atoi(l)
			if err != nil || n > 255 {
				return netip.Addr{}, false
			}
			a[3-i] = byte(n)
		}
		return netip.AddrFrom4(a), true
	}
	if rest, ok := strings.CutSuffix(name, ".ip6.arpa."); ok {
		if len(rest) != 63 {
			return netip.Addr{}, false
		}
		var a [16]byte
		for i := 0; i < 32; i++ {
			c := rest[i*2]
			if i < 31 && rest[i*2+1] != '.' {
				return netip.Addr{}, false
			}
			var v byte
			switch {
			case c >= '0' && c <= '9':
				v = c - '0'
			case c >= 'a' && c <= 'f':
				v = c - 'a' + 10
			default:
				return netip.Addr{}, false
			}
			// Nibble i counts from the least significant end.
			byteIdx := 15 - i/2
			if i%2 == 0 {
				a[byteIdx] |= v
			} else {
				a[byteIdx] |= v << 4
			}
		}
		return netip.AddrFrom16(a), true
	}
	return netip.Addr{}, false
}

// Canonical lower-cases name and makes it fully qualified, the form every
// key in the index has. It avoids allocating in the common case where the
// name already is canonical.
func Canonical(name string) string {
	lower := true
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= 'A' && c <= 'Z' {
			lower = false
			break
		}
	}
	if !lower {
		name = strings.ToLower(name)
	}
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return name
}

// firstLabel splits "a.b.c." into "a" and "b.c.". It treats a backslash
// escape as part of the label, so "a\.b.c." splits after "a\.b".
func firstLabel(name string) (label, rest string) {
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case '\\':
			i++
		case '.':
			return name[:i], name[i+1:]
		}
	}
	return name, ""
}
