package nftables

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// Tx is a transaction on one table: netlink messages that the kernel
// applies all together or not at all (Conn.Run). Operations are encoded
// as they are added; the first error sticks and is returned by Run.
type Tx struct {
	fam   Family
	table string
	// full are filled chunks of messages, buf the one being filled: a
	// batch of 100 MiB grown as one slice spends seconds copying itself.
	// A message never straddles two chunks (patching lengths needs it
	// whole); the kernel reads all chunks as one batch (sendmsg's iovec).
	full  [][]byte
	buf   []byte
	size  int  // bytes in full
	ops   []op // one per message, for error reports
	last  int  // offset of the last message in buf
	setID uint32
	err   error
}

// op describes a message of the transaction, to say which one failed.
type op struct {
	kind string
	name string
}

// Message types (NFT_MSG_*), in the nftables subsystem.
const (
	msgNewTable   = unix.NFT_MSG_NEWTABLE
	msgDelTable   = unix.NFT_MSG_DELTABLE
	msgNewChain   = unix.NFT_MSG_NEWCHAIN
	msgDelChain   = unix.NFT_MSG_DELCHAIN
	msgNewRule    = unix.NFT_MSG_NEWRULE
	msgDelRule    = unix.NFT_MSG_DELRULE
	msgNewSet     = unix.NFT_MSG_NEWSET
	msgDelSet     = unix.NFT_MSG_DELSET
	msgNewSetElem = unix.NFT_MSG_NEWSETELEM
	msgDelSetElem = unix.NFT_MSG_DELSETELEM
)

// Attributes the unix package lacks.
const (
	attrTableUserdata = 6  // NFTA_TABLE_USERDATA
	attrChainUserdata = 12 // NFTA_CHAIN_USERDATA
	attrSetElemUdata  = 6  // NFTA_SET_ELEM_USERDATA
	// maxElemsPerMsg keeps a message's element list under the 64 KiB an
	// attribute's length can say.
	maxElemsPerMsg = 256
)

// batchHeader is the room kept at the start of a transaction's buffer for
// the message that opens the batch, so that sending needs no copy.
const batchHeader = unix.NLMSG_HDRLEN + 4

// chunkSize is the size of a chunk of messages, and maxMsg the most one
// message may take (a nested attribute's length is 16 bits).
const (
	chunkSize = 4 << 20
	maxMsg    = 1 << 16
)

// NewTx starts a transaction on table of family f.
func NewTx(f Family, table string) *Tx {
	return &Tx{fam: f, table: table, buf: make([]byte, batchHeader, 4096)}
}

// Len is the number of messages so far.
func (t *Tx) Len() int { return len(t.ops) }

// Bytes is the size of the encoded messages so far.
func (t *Tx) Bytes() int { return t.size + len(t.buf) - batchHeader }

func (t *Tx) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}

// msg starts a message and returns its offset; end finishes it.
func (t *Tx) msg(typ uint16, flags uint16, kind, name string) int {
	if cap(t.buf)-len(t.buf) < maxMsg {
		if len(t.buf) >= chunkSize/2 {
			t.full = append(t.full, t.buf)
			t.size += len(t.buf)
			t.buf = make([]byte, 0, chunkSize)
		} else {
			t.buf = slices.Grow(t.buf, min(2*cap(t.buf), chunkSize))
		}
	}
	off := len(t.buf)
	t.last = off
	t.buf = binary.NativeEndian.AppendUint32(t.buf, 0) // length, set by end
	t.buf = binary.NativeEndian.AppendUint16(t.buf, unix.NFNL_SUBSYS_NFTABLES<<8|typ)
	t.buf = binary.NativeEndian.AppendUint16(t.buf, unix.NLM_F_REQUEST|flags)
	t.buf = binary.NativeEndian.AppendUint32(t.buf, uint32(len(t.ops)+1)) // seq
	t.buf = binary.NativeEndian.AppendUint32(t.buf, 0)                    // port id
	t.buf = append(t.buf, byte(t.fam), unix.NFNETLINK_V0, 0, 0)           // nfgenmsg
	t.ops = append(t.ops, op{kind, name})
	return off
}

func (t *Tx) end(off int) {
	binary.NativeEndian.PutUint32(t.buf[off:], uint32(len(t.buf)-off))
}

func (t *Tx) attr(typ uint16, data []byte) {
	t.buf = binary.NativeEndian.AppendUint16(t.buf, uint16(4+len(data)))
	t.buf = binary.NativeEndian.AppendUint16(t.buf, typ)
	t.buf = append(t.buf, data...)
	for len(t.buf)%4 != 0 {
		t.buf = append(t.buf, 0)
	}
}

func (t *Tx) str(typ uint16, s string) { t.attr(typ, append([]byte(s), 0)) }
func (t *Tx) u32(typ uint16, v uint32) { t.attr(typ, binary.BigEndian.AppendUint32(nil, v)) }
func (t *Tx) u64(typ uint16, v uint64) { t.attr(typ, binary.BigEndian.AppendUint64(nil, v)) }

// nest opens a nested attribute; close it with unnest.
func (t *Tx) nest(typ uint16) int {
	off := len(t.buf)
	t.buf = binary.NativeEndian.AppendUint16(t.buf, 0)
	t.buf = binary.NativeEndian.AppendUint16(t.buf, typ|unix.NLA_F_NESTED)
	return off
}

func (t *Tx) unnest(off int) {
	n := len(t.buf) - off
	if n > 0xffff {
		t.fail(fmt.Errorf("nftables: attribute of %d bytes is too long", n))
	}
	binary.NativeEndian.PutUint16(t.buf[off:], uint16(n))
}

// AddTable creates the table unless it exists.
func (t *Tx) AddTable(comment string) {
	m := t.msg(msgNewTable, unix.NLM_F_CREATE, "add table", t.table)
	t.str(unix.NFTA_TABLE_NAME, t.table)
	t.u32(unix.NFTA_TABLE_FLAGS, 0)
	if comment != "" {
		t.attr(attrTableUserdata, userdata.AppendString(nil, userdata.TypeComment, comment))
	}
	t.end(m)
}

// DeleteTable deletes the table and everything in it; it must exist.
func (t *Tx) DeleteTable() {
	m := t.msg(msgDelTable, 0, "delete table", t.table)
	t.str(unix.NFTA_TABLE_NAME, t.table)
	t.end(m)
}

// AddChain creates a chain (without its rules) unless it exists.
func (t *Tx) AddChain(c *Chain) {
	m := t.msg(msgNewChain, unix.NLM_F_CREATE, "add chain", c.Name)
	t.str(unix.NFTA_CHAIN_TABLE, t.table)
	t.str(unix.NFTA_CHAIN_NAME, c.Name)
	if c.Hook != nil {
		num, ok := hookNums[c.Hook.Hook]
		if !ok {
			t.fail(fmt.Errorf("nftables: chain %s: unknown hook %q", c.Name, c.Hook.Hook))
		}
		h := t.nest(unix.NFTA_CHAIN_HOOK)
		t.u32(unix.NFTA_HOOK_HOOKNUM, num)
		t.u32(unix.NFTA_HOOK_PRIORITY, uint32(c.Hook.Priority))
		t.unnest(h)
		t.u32(unix.NFTA_CHAIN_POLICY, 1) // NF_ACCEPT
		t.str(unix.NFTA_CHAIN_TYPE, c.Hook.Type)
	}
	if c.Comment != "" {
		t.attr(attrChainUserdata, userdata.AppendString(nil, userdata.TypeComment, c.Comment))
	}
	t.end(m)
}

// FlushChain deletes every rule of a chain.
func (t *Tx) FlushChain(name string) {
	t.byName(msgDelRule, "flush chain", unix.NFTA_RULE_TABLE, unix.NFTA_RULE_CHAIN, name)
}

// DeleteChain deletes an empty chain nothing refers to.
func (t *Tx) DeleteChain(name string) {
	t.byName(msgDelChain, "delete chain", unix.NFTA_CHAIN_TABLE, unix.NFTA_CHAIN_NAME, name)
}

// AddRule appends a rule to a chain, after the anonymous sets it uses.
func (t *Tx) AddRule(chain string, r Rule) {
	c, err := compile(t.fam, r, func() uint32 { t.setID++; return t.setID })
	if err != nil {
		t.fail(fmt.Errorf("nftables: chain %s: %w", chain, err))
		return
	}
	for _, s := range c.anon {
		t.addAnonSet(s)
	}
	m := t.msg(msgNewRule, unix.NLM_F_CREATE|unix.NLM_F_APPEND, "add rule to", chain)
	t.str(unix.NFTA_RULE_TABLE, t.table)
	t.str(unix.NFTA_RULE_CHAIN, chain)
	list := t.nest(unix.NFTA_RULE_EXPRESSIONS)
	for _, e := range c.exprs {
		if err := t.expr(e); err != nil {
			t.fail(fmt.Errorf("nftables: chain %s: %s: %w", chain, r.Format(t.fam), err))
			return
		}
	}
	t.unnest(list)
	if r.Comment != "" {
		t.attr(unix.NFTA_RULE_USERDATA, userdata.AppendString(nil, userdata.TypeComment, r.Comment))
	}
	t.end(m)
}

// Set flags (NFT_SET_*).
const (
	setAnonymous = unix.NFT_SET_ANONYMOUS
	setConstant  = unix.NFT_SET_CONSTANT
	setInterval  = unix.NFT_SET_INTERVAL
	setMap       = unix.NFT_SET_MAP
	setTimeout   = unix.NFT_SET_TIMEOUT
	setEval      = unix.NFT_SET_EVAL
)

// dynamicSetSize is the size nft gives dynamic sets.
const dynamicSetSize = 65535

// AddSet creates a named set or map unless it exists (with the same
// type; a different one fails the transaction).
func (t *Tx) AddSet(s *Set) {
	m := t.msg(msgNewSet, unix.NLM_F_CREATE, "add set", s.Name)
	t.str(unix.NFTA_SET_TABLE, t.table)
	t.str(unix.NFTA_SET_NAME, s.Name)
	var flags uint32
	if s.Verdicts {
		flags |= setMap
	}
	if s.Timeout > 0 {
		flags |= setTimeout | setEval
	}
	t.u32(unix.NFTA_SET_FLAGS, flags)
	typ, n := s.Key.magic(t.fam)
	t.u32(unix.NFTA_SET_KEY_TYPE, typ)
	t.u32(unix.NFTA_SET_KEY_LEN, n)
	if s.Verdicts {
		t.u32(unix.NFTA_SET_DATA_TYPE, unix.NFT_DATA_VERDICT)
		t.u32(unix.NFTA_SET_DATA_LEN, 0)
	}
	if s.Timeout > 0 {
		d := t.nest(unix.NFTA_SET_DESC)
		t.u32(unix.NFTA_SET_DESC_SIZE, dynamicSetSize)
		t.unnest(d)
		t.u64(unix.NFTA_SET_TIMEOUT, uint64(s.Timeout/time.Millisecond))
	}
	t.setID++
	t.u32(unix.NFTA_SET_ID, t.setID)
	ud := userdata.AppendUint32(nil, userdata.NFTNL_UDATA_SET_KEYBYTEORDER, 2) // big endian
	if s.Comment != "" {
		ud = userdata.AppendString(ud, userdata.NFTNL_UDATA_SET_COMMENT, s.Comment)
	}
	t.attr(unix.NFTA_SET_USERDATA, ud)
	t.end(m)
}

func (t *Tx) addAnonSet(s anonSet) {
	name := s.name
	flags := uint32(setAnonymous | setConstant)
	if s.isMap {
		flags |= setMap
	}
	if s.interval {
		flags |= setInterval
	}
	m := t.msg(msgNewSet, unix.NLM_F_CREATE, "add anonymous set for", "next rule")
	t.str(unix.NFTA_SET_TABLE, t.table)
	t.str(unix.NFTA_SET_NAME, name)
	t.u32(unix.NFTA_SET_FLAGS, flags)
	t.u32(unix.NFTA_SET_KEY_TYPE, s.keyType)
	t.u32(unix.NFTA_SET_KEY_LEN, s.keyLen)
	switch {
	case s.isMap && s.dataType != 0:
		t.u32(unix.NFTA_SET_DATA_TYPE, s.dataType)
		t.u32(unix.NFTA_SET_DATA_LEN, s.dataLen)
	case s.isMap:
		t.u32(unix.NFTA_SET_DATA_TYPE, unix.NFT_DATA_VERDICT)
		t.u32(unix.NFTA_SET_DATA_LEN, 0)
	}
	d := t.nest(unix.NFTA_SET_DESC)
	t.u32(unix.NFTA_SET_DESC_SIZE, uint32(len(s.elems)))
	t.unnest(d)
	t.u32(unix.NFTA_SET_ID, s.id)
	order := uint32(2)
	if s.keyType == typeInteger {
		order = 1 // numgen's numbers are in host order
	}
	t.attr(unix.NFTA_SET_USERDATA, userdata.AppendUint32(nil, userdata.NFTNL_UDATA_SET_KEYBYTEORDER, order))
	t.end(m)

	m = t.msg(msgNewSetElem, unix.NLM_F_CREATE, "add elements to anonymous set for", "next rule")
	t.str(unix.NFTA_SET_ELEM_LIST_TABLE, t.table)
	t.str(unix.NFTA_SET_ELEM_LIST_SET, name)
	t.u32(unix.NFTA_SET_ELEM_LIST_SET_ID, s.id)
	list := t.nest(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
	for _, e := range s.elems {
		el := t.nest(unix.NFTA_LIST_ELEM)
		if e.end {
			t.u32(unix.NFTA_SET_ELEM_FLAGS, unix.NFT_SET_ELEM_INTERVAL_END)
		}
		k := t.nest(unix.NFTA_SET_ELEM_KEY)
		t.attr(unix.NFTA_DATA_VALUE, e.key)
		t.unnest(k)
		if e.verdict != nil {
			t.verdictData(*e.verdict)
		}
		if e.data != nil {
			d := t.nest(unix.NFTA_SET_ELEM_DATA)
			t.attr(unix.NFTA_DATA_VALUE, e.data)
			t.unnest(d)
		}
		t.unnest(el)
	}
	t.unnest(list)
	t.end(m)
}

func (t *Tx) verdictData(v Verdict) {
	ve, err := verdictExpr(v)
	if err != nil {
		t.fail(err)
		return
	}
	d := t.nest(unix.NFTA_SET_ELEM_DATA)
	vd := t.nest(unix.NFTA_DATA_VERDICT)
	t.u32(unix.NFTA_VERDICT_CODE, uint32(int32(ve.Kind)))
	if ve.Chain != "" {
		t.str(unix.NFTA_VERDICT_CHAIN, ve.Chain)
	}
	t.unnest(vd)
	t.unnest(d)
}

// DeleteSet deletes a named set or map.
func (t *Tx) DeleteSet(name string) {
	t.byName(msgDelSet, "delete set", unix.NFTA_SET_TABLE, unix.NFTA_SET_NAME, name)
}

// FlushSet deletes every element of a set or map.
func (t *Tx) FlushSet(name string) {
	t.byName(msgDelSetElem, "flush set", unix.NFTA_SET_ELEM_LIST_TABLE, unix.NFTA_SET_ELEM_LIST_SET, name)
}

// byName adds a message of type typ whose only attributes name its
// object: the table (tableAttr) and the object in it (nameAttr). The
// deletes and flushes are such messages.
func (t *Tx) byName(typ uint16, kind string, tableAttr, nameAttr uint16, name string) {
	m := t.msg(typ, 0, kind, name)
	t.str(tableAttr, t.table)
	t.str(nameAttr, name)
	t.end(m)
}

// AddElements adds elements to a set or map; adding a key that is
// already there with another verdict fails, so delete it first.
func (t *Tx) AddElements(s *Set, elems []Element) {
	t.elements(msgNewSetElem, unix.NLM_F_CREATE, s, elems)
}

// DeleteElements deletes elements (by key) from a set or map; each must
// be there.
func (t *Tx) DeleteElements(s *Set, elems []Element) {
	t.elements(msgDelSetElem, 0, s, elems)
}

func (t *Tx) elements(typ uint16, flags uint16, s *Set, elems []Element) {
	kind := "add elements to"
	if typ == msgDelSetElem {
		kind = "delete elements from"
	}
	for len(elems) > 0 {
		n := min(len(elems), maxElemsPerMsg)
		m := t.msg(typ, flags, kind, s.Name)
		t.str(unix.NFTA_SET_ELEM_LIST_TABLE, t.table)
		t.str(unix.NFTA_SET_ELEM_LIST_SET, s.Name)
		list := t.nest(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
		for _, e := range elems[:n] {
			key, err := encodeKey(t.fam, s.Key, e.Key)
			if err != nil {
				t.fail(fmt.Errorf("nftables: set %s: %w", s.Name, err))
				return
			}
			el := t.nest(unix.NFTA_LIST_ELEM)
			k := t.nest(unix.NFTA_SET_ELEM_KEY)
			t.attr(unix.NFTA_DATA_VALUE, key)
			t.unnest(k)
			if typ == msgNewSetElem {
				if s.Verdicts {
					t.verdictData(e.Verdict)
				}
				if e.Comment != "" {
					t.attr(attrSetElemUdata, userdata.AppendString(nil, userdata.NFTNL_UDATA_SET_ELEM_COMMENT, e.Comment))
				}
			}
			t.unnest(el)
		}
		t.unnest(list)
		t.end(m)
		elems = elems[n:]
	}
}

// AddAll adds a whole table to the transaction: the table, its sets and
// maps, its chains (all of them before any rule, so that rules can jump
// anywhere), their rules and the elements. Into an empty namespace it
// creates the table; over an existing one it adds to it.
func (t *Tx) AddAll(tbl *Table) { t.Fill(tbl, FillOptions{}) }

// FillOptions say how Fill treats a table that may exist already.
type FillOptions struct {
	// Replace empties every set and chain of the table before filling it
	// again (but for the sets Keep names), so that the kernel ends up
	// holding exactly the table, in one step for packets.
	Replace bool
	Keep    func(set string) bool
	// EmptyChains and DeleteSets are the existing table's leftovers: the
	// chains are emptied, and the sets deleted once every rule that could
	// use them is gone.
	EmptyChains, DeleteSets []string
}

// Fill writes a whole table as AddAll does, over what the kernel may
// already hold (see FillOptions); it owns the order that makes that work.
func (t *Tx) Fill(tbl *Table, o FillOptions) {
	t.AddTable(tbl.Comment)
	for _, s := range tbl.Sets {
		t.AddSet(s)
		if o.Replace && (o.Keep == nil || !o.Keep(s.Name)) {
			t.FlushSet(s.Name)
		}
	}
	for _, c := range tbl.Chains {
		t.AddChain(c)
		if o.Replace {
			t.FlushChain(c.Name)
		}
	}
	for _, c := range o.EmptyChains {
		t.FlushChain(c)
	}
	for _, s := range o.DeleteSets {
		t.DeleteSet(s)
	}
	for _, c := range tbl.Chains {
		for _, r := range c.Rules {
			t.AddRule(c.Name, r)
		}
	}
	for _, s := range tbl.Sets {
		if e := tbl.Elements[s.Name]; len(e) > 0 {
			t.AddElements(s, e)
		}
	}
}
