package nftables

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Hook makes a chain a base chain: netfilter calls it from a hook.
type Hook struct {
	Type     string // filter or nat
	Hook     string // prerouting, input, forward, output, postrouting
	Priority int32
}

// hookNums are netfilter's hook numbers (NF_INET_*).
var hookNums = map[string]uint32{"prerouting": 0, "input": 1, "forward": 2, "output": 3, "postrouting": 4}

// Chain is a chain and its rules.
type Chain struct {
	Name    string
	Hook    *Hook // nil for a regular chain
	Comment string
	Rules   []Rule
}

// KeyType is what a set's or map's elements are keyed by.
type KeyType uint8

// Key types of kube-proxy's sets and maps.
const (
	KeyAddr          KeyType = iota + 1 // ipv4_addr / ipv6_addr
	KeyProtoPort                        // inet_proto . inet_service
	KeyAddrProtoPort                    // ipv4_addr . inet_proto . inet_service
	// KeyConn is a connection's addresses, protocol and destination
	// port: ipv4_addr . ipv4_addr . inet_proto . inet_service.
	KeyConn
)

// Set is a named set (a map when Verdicts). Its elements live apart, in
// Table.Elements, because they change far more often than the set.
type Set struct {
	Name string
	Key  KeyType
	// Verdicts makes it a verdict map.
	Verdicts bool
	// Timeout makes it a dynamic set whose elements expire (rules add
	// them with UpdateSrcSet).
	Timeout time.Duration
	Comment string
}

// Key is a set element's key; the set's KeyType says which fields count.
type Key struct {
	Addr netip.Addr
	// Addr2 is the second address of a KeyConn.
	Addr2 netip.Addr
	Proto Proto
	Port  uint16
}

func (k Key) format(t KeyType) string {
	switch t {
	case KeyAddr:
		return k.Addr.String()
	case KeyProtoPort:
		return k.Proto.String() + " . " + strconv.Itoa(int(k.Port))
	case KeyConn:
		return k.Addr.String() + " . " + k.Addr2.String() + " . " + k.Proto.String() + " . " + strconv.Itoa(int(k.Port))
	}
	return k.Addr.String() + " . " + k.Proto.String() + " . " + strconv.Itoa(int(k.Port))
}

// Compare orders keys by address, second address, protocol, then port.
func (k Key) Compare(o Key) int {
	if c := k.Addr.Compare(o.Addr); c != 0 {
		return c
	}
	if c := k.Addr2.Compare(o.Addr2); c != 0 {
		return c
	}
	if c := cmp.Compare(k.Proto, o.Proto); c != 0 {
		return c
	}
	return cmp.Compare(k.Port, o.Port)
}

// FormatElement prints an element of s as nft does: key, verdict (maps),
// comment.
func (s *Set) FormatElement(e Element) string {
	out := e.Key.format(s.Key)
	if s.Verdicts {
		out += " : " + e.Verdict.String()
	}
	if e.Comment != "" {
		out += " comment " + strconv.Quote(e.Comment)
	}
	return out
}

// Element is a set or map element.
type Element struct {
	Key     Key
	Verdict Verdict // maps only
	Comment string
}

// Table is a whole table, as Build wants it or as Read found it.
type Table struct {
	Family  Family
	Name    string
	Comment string
	Sets    []*Set
	Chains  []*Chain
	// Elements of each set, by set name.
	Elements map[string][]Element
}

// Chain returns the chain called name, or nil.
func (t *Table) Chain(name string) *Chain {
	for _, c := range t.Chains {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Set returns the set called name, or nil.
func (t *Table) Set(name string) *Set {
	for _, s := range t.Sets {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Format prints the table in nft's syntax, sets first and in name order,
// then chains in name order, elements sorted: the same table prints the
// same however it was built. Sets' and chains' order in the kernel has
// no meaning, so golden files need not depend on it.
func (t *Table) Format() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s %s {\n", t.Family, t.Name)
	if t.Comment != "" {
		fmt.Fprintf(&b, "\tcomment %q\n", t.Comment)
	}
	sets := slices.SortedFunc(slices.Values(t.Sets), func(a, b *Set) int { return strings.Compare(a.Name, b.Name) })
	for _, s := range sets {
		kind := "set"
		if s.Verdicts {
			kind = "map"
		}
		fmt.Fprintf(&b, "\t%s %s {\n\t\ttype %s", kind, s.Name, s.Key.nftType(t.Family))
		if s.Verdicts {
			b.WriteString(" : verdict")
		}
		b.WriteString("\n")
		if s.Timeout > 0 {
			fmt.Fprintf(&b, "\t\tflags dynamic,timeout\n\t\ttimeout %ds\n", int64(s.Timeout/time.Second))
		}
		if s.Comment != "" {
			fmt.Fprintf(&b, "\t\tcomment %q\n", s.Comment)
		}
		elems := slices.SortedFunc(slices.Values(t.Elements[s.Name]), func(a, b Element) int { return a.Key.Compare(b.Key) })
		if len(elems) > 0 {
			b.WriteString("\t\telements = {")
			for i, e := range elems {
				if i > 0 {
					b.WriteString(",")
				}
				b.WriteString("\n\t\t\t" + s.FormatElement(e))
			}
			b.WriteString("\n\t\t}\n")
		}
		b.WriteString("\t}\n")
	}
	chains := slices.SortedFunc(slices.Values(t.Chains), func(a, b *Chain) int { return strings.Compare(a.Name, b.Name) })
	for _, c := range chains {
		fmt.Fprintf(&b, "\tchain %s {\n", c.Name)
		if c.Hook != nil {
			fmt.Fprintf(&b, "\t\ttype %s hook %s priority %d; policy accept;\n", c.Hook.Type, c.Hook.Hook, c.Hook.Priority)
		}
		if c.Comment != "" {
			fmt.Fprintf(&b, "\t\tcomment %q\n", c.Comment)
		}
		for _, r := range c.Rules {
			b.WriteString("\t\t" + r.Format(t.Family) + "\n")
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

func (k KeyType) nftType(f Family) string {
	addr := "ipv4_addr"
	if f == IPv6 {
		addr = "ipv6_addr"
	}
	switch k {
	case KeyAddr:
		return addr
	case KeyProtoPort:
		return "inet_proto . inet_service"
	case KeyConn:
		return addr + " . " + addr + " . inet_proto . inet_service"
	}
	return addr + " . inet_proto . inet_service"
}
