package nftables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	gnft "github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// Reader lists one table of the network namespace it was opened in, in
// the statement language. Chains are read one at a time, so a tracer
// that follows one packet reads a handful of chains of a big table.
type Reader struct {
	mu  sync.Mutex
	fd  int // for the dumps the netlink library gets wrong
	c   *gnft.Conn
	fam Family
	t   *gnft.Table
}

// OpenReader opens a reader in the calling thread's network namespace.
func OpenReader(f Family, table string) (*Reader, error) {
	c, err := gnft.New(gnft.AsLasting())
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	fd, err := dumpSocket()
	if err != nil {
		c.CloseLasting()
		return nil, fmt.Errorf("nftables: %w", err)
	}
	return &Reader{fd: fd, c: c, fam: f, t: &gnft.Table{Name: table, Family: gnft.TableFamily(f)}}, nil
}

// Close closes the reader's socket.
func (r *Reader) Close() error {
	unix.Close(r.fd)
	return r.c.CloseLasting()
}

// Exists says whether the table is there.
func (r *Reader) Exists() (bool, error) {
	_, err := r.c.ListTableOfFamily(r.t.Name, r.t.Family)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOENT) || strings.Contains(err.Error(), "no such file") {
		return false, nil
	}
	return false, fmt.Errorf("nftables: list table %s %s: %w", r.fam, r.t.Name, err)
}

// ChainNames lists the table's chains.
func (r *Reader) ChainNames() ([]string, error) {
	all, err := r.c.ListChainsOfTableFamily(r.t.Family)
	if err != nil {
		return nil, fmt.Errorf("nftables: list chains: %w", err)
	}
	var out []string
	for _, c := range all {
		if c.Table != nil && c.Table.Name == r.t.Name {
			out = append(out, c.Name)
		}
	}
	return out, nil
}

var hookNames = map[uint32]string{0: "prerouting", 1: "input", 2: "forward", 3: "output", 4: "postrouting"}

// Chain reads a chain and its rules.
func (r *Reader) Chain(name string) (*Chain, error) {
	gc, err := r.c.ListChain(r.t, name)
	if err != nil {
		return nil, fmt.Errorf("nftables: chain %s: %w", name, err)
	}
	c := &Chain{Name: name}
	if gc.Hooknum != nil && gc.Priority != nil {
		c.Hook = &Hook{Type: string(gc.Type), Hook: hookNames[uint32(*gc.Hooknum)], Priority: int32(*gc.Priority)}
	}
	rules, err := r.c.GetRules(r.t, &gnft.Chain{Name: name, Table: r.t})
	if err != nil {
		return nil, fmt.Errorf("nftables: rules of %s: %w", name, err)
	}
	for _, gr := range rules {
		stmts, err := decode(r.fam, gr.Exprs, r.anon)
		if err != nil {
			return nil, fmt.Errorf("nftables: chain %s, rule %d: %w", name, gr.Handle, err)
		}
		rule := Rule{Stmts: stmts}
		if s, ok := userdata.GetString(gr.UserData, userdata.TypeComment); ok {
			rule.Comment = s
		}
		c.Rules = append(c.Rules, rule)
	}
	return c, nil
}

func (r *Reader) anon(name string) ([]anonElem, error) {
	return r.elements(name)
}

// elements dumps a set's elements (by hand: the netlink library loses
// anonymous maps' verdicts).
func (r *Reader) elements(set string) ([]anonElem, error) {
	r.mu.Lock()
	msgs, err := dump(r.fd, r.fam, unix.NFT_MSG_GETSETELEM, r.t.Name, attr{unix.NFTA_SET_ELEM_LIST_SET, append([]byte(set), 0)})
	r.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("elements of %s: %w", set, err)
	}
	var out []anonElem
	for _, m := range msgs {
		for _, a := range attrs(m) {
			if a.typ != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
				continue
			}
			for _, el := range attrs(a.data) {
				var e anonElem
				for _, f := range attrs(el.data) {
					switch f.typ {
					case unix.NFTA_SET_ELEM_KEY:
						for _, v := range attrs(f.data) {
							if v.typ == unix.NFTA_DATA_VALUE {
								e.key = v.data
							}
						}
					case unix.NFTA_SET_ELEM_FLAGS:
						e.end = be32(f.data)&unix.NFT_SET_ELEM_INTERVAL_END != 0
					case unix.NFTA_SET_ELEM_DATA:
						for _, d := range attrs(f.data) {
							if d.typ == unix.NFTA_DATA_VALUE {
								e.data = d.data
							}
							if d.typ != unix.NFTA_DATA_VERDICT {
								continue
							}
							var ve expr.Verdict
							for _, v := range attrs(d.data) {
								switch v.typ {
								case unix.NFTA_VERDICT_CODE:
									ve.Kind = expr.VerdictKind(int32(be32(v.data)))
								case unix.NFTA_VERDICT_CHAIN:
									ve.Chain = cstring(v.data)
								}
							}
							v, err := verdictOf(&ve)
							if err != nil {
								return nil, fmt.Errorf("set %s: %w", set, err)
							}
							e.verdict = &v
						}
					case attrSetElemUdata:
						if c, ok := userdata.GetString(f.data, userdata.NFTNL_UDATA_SET_ELEM_COMMENT); ok {
							e.comment = c
						}
					}
				}
				out = append(out, e)
			}
		}
	}
	return out, nil
}

func verdictOf(e *expr.Verdict) (Verdict, error) {
	switch e.Kind {
	case expr.VerdictAccept:
		return Verdict{Kind: Accept}, nil
	case expr.VerdictDrop:
		return Verdict{Kind: Drop}, nil
	case expr.VerdictReturn:
		return Verdict{Kind: Return}, nil
	case expr.VerdictJump:
		return Verdict{Kind: Jump, Chain: e.Chain}, nil
	case expr.VerdictGoto:
		return Verdict{Kind: Goto, Chain: e.Chain}, nil
	}
	return Verdict{}, fmt.Errorf("unknown verdict %d", e.Kind)
}

// Sets lists the table's named sets and maps (not the anonymous ones
// that belong to rules). It reads them itself: the netlink library loses
// a map's key type and every set's comment.
func (r *Reader) Sets() ([]*Set, error) {
	r.mu.Lock()
	msgs, err := dump(r.fd, r.fam, unix.NFT_MSG_GETSET, r.t.Name)
	r.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("nftables: list sets: %w", err)
	}
	var out []*Set
	for _, m := range msgs {
		s := &Set{}
		var flags, magic uint32
		var table string
		for _, a := range attrs(m) {
			switch a.typ {
			case unix.NFTA_SET_TABLE:
				table = cstring(a.data)
			case unix.NFTA_SET_NAME:
				s.Name = cstring(a.data)
			case unix.NFTA_SET_FLAGS:
				flags = be32(a.data)
			case unix.NFTA_SET_KEY_TYPE:
				magic = be32(a.data)
			case unix.NFTA_SET_TIMEOUT:
				if len(a.data) == 8 {
					s.Timeout = time.Duration(binary.BigEndian.Uint64(a.data)) * time.Millisecond
				}
			case unix.NFTA_SET_USERDATA:
				if c, ok := userdata.GetString(a.data, userdata.NFTNL_UDATA_SET_COMMENT); ok {
					s.Comment = c
				}
			}
		}
		if table != r.t.Name || flags&setAnonymous != 0 || strings.HasPrefix(s.Name, "__") {
			continue
		}
		s.Verdicts = flags&setMap != 0
		if flags&setTimeout == 0 {
			s.Timeout = 0
		}
		for _, k := range []KeyType{KeyAddr, KeyProtoPort, KeyAddrProtoPort, KeyConn} {
			if m, _ := k.magic(r.fam); m == magic {
				s.Key = k
			}
		}
		if s.Key == 0 {
			return nil, fmt.Errorf("nftables: set %s: key type %#x is none svcnet writes", s.Name, magic)
		}
		out = append(out, s)
	}
	return out, nil
}

// Elements lists a named set's or map's elements.
func (r *Reader) Elements(s *Set) ([]Element, error) {
	elems, err := r.elements(s.Name)
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	out := make([]Element, 0, len(elems))
	for _, e := range elems {
		k, err := decodeKey(r.fam, s.Key, e.key)
		if err != nil {
			return nil, fmt.Errorf("nftables: set %s: %w", s.Name, err)
		}
		el := Element{Key: k, Comment: e.comment}
		if e.verdict != nil {
			el.Verdict = *e.verdict
		}
		out = append(out, el)
	}
	return out, nil
}

func decodeKey(f Family, t KeyType, b []byte) (Key, error) {
	var k Key
	var addrs []*netip.Addr
	switch t {
	case KeyAddr, KeyAddrProtoPort:
		addrs = []*netip.Addr{&k.Addr}
	case KeyConn:
		addrs = []*netip.Addr{&k.Addr, &k.Addr2}
	}
	for _, a := range addrs {
		if len(b) < f.addrLen() {
			return k, fmt.Errorf("key %x too short", b)
		}
		*a, _ = netip.AddrFromSlice(b[:f.addrLen()])
		b = b[f.addrLen():]
	}
	if t != KeyAddr {
		if len(b) < 6 {
			return k, fmt.Errorf("key %x too short", b)
		}
		k.Proto, k.Port = Proto(b[0]), binary.BigEndian.Uint16(b[4:])
	}
	return k, nil
}

// Table reads the whole table. Comments on the table and on chains are
// not read back (the netlink library does not return them).
func (r *Reader) Table() (*Table, error) {
	t := &Table{Family: r.fam, Name: r.t.Name, Elements: map[string][]Element{}}
	sets, err := r.Sets()
	if err != nil {
		return nil, err
	}
	t.Sets = sets
	for _, s := range sets {
		e, err := r.Elements(s)
		if err != nil {
			return nil, err
		}
		if len(e) > 0 {
			t.Elements[s.Name] = e
		}
	}
	names, err := r.ChainNames()
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	for _, n := range names {
		c, err := r.Chain(n)
		if err != nil {
			return nil, err
		}
		t.Chains = append(t.Chains, c)
	}
	return t, nil
}
