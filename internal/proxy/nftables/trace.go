package nftables

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	nft "github.com/svcnet/svcnet/internal/nftables"
	"github.com/svcnet/svcnet/internal/proxy/trace"
)

// Source is where the tracer reads the table: a built one (Table) or the
// kernel's (Live), chain by chain, so that tracing one packet through a
// table of 10,000 services reads a handful of chains.
type Source interface {
	Family() nft.Family
	Chain(name string) (*nft.Chain, error)
	// Elements of a named set or map; for the affinity sets, the clients
	// recently sent to the endpoint.
	Elements(set string) ([]nft.Element, error)
}

// TableSource traces through a built table; recent names the affinity
// sets that hold the packet's source.
func TableSource(t *nft.Table, recent map[string]bool) Source { return tableSource{t, recent} }

type tableSource struct {
	t      *nft.Table
	recent map[string]bool
}

func (s tableSource) Family() nft.Family { return s.t.Family }

func (s tableSource) Chain(name string) (*nft.Chain, error) {
	if c := s.t.Chain(name); c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("no chain %s", name)
}

func (s tableSource) Elements(set string) ([]nft.Element, error) {
	if strings.HasPrefix(set, PrefixAffinity) {
		if s.recent[set] {
			return []nft.Element{{Key: nft.Key{}}}, nil // any address: see matchSet
		}
		return nil, nil
	}
	return s.t.Elements[set], nil
}

// LiveSource traces through the kernel's table, read as needed.
func LiveSource(r *nft.Reader, f nft.Family) Source {
	return &liveSource{r: r, f: f, chains: map[string]*nft.Chain{}, elems: map[string][]nft.Element{}}
}

type liveSource struct {
	r      *nft.Reader
	f      nft.Family
	chains map[string]*nft.Chain
	elems  map[string][]nft.Element
	sets   map[string]*nft.Set
}

func (s *liveSource) Family() nft.Family { return s.f }

func (s *liveSource) Chain(name string) (*nft.Chain, error) {
	if c, ok := s.chains[name]; ok {
		return c, nil
	}
	c, err := s.r.Chain(name)
	if err != nil {
		return nil, err
	}
	s.chains[name] = c
	return c, nil
}

func (s *liveSource) Elements(set string) ([]nft.Element, error) {
	if e, ok := s.elems[set]; ok {
		return e, nil
	}
	if s.sets == nil {
		sets, err := s.r.Sets()
		if err != nil {
			return nil, err
		}
		s.sets = map[string]*nft.Set{}
		for _, st := range sets {
			s.sets[st.Name] = st
		}
	}
	st := s.sets[set]
	if st == nil {
		return nil, fmt.Errorf("no set %s", set)
	}
	e, err := s.r.Elements(st)
	if err != nil {
		return nil, err
	}
	s.elems[set] = e
	return e, nil
}

// maxDepth bounds chain nesting; kube-proxy's chains nest 4 deep.
const maxDepth = 32

// Trace walks the first packet of a connection through the table, hook
// by hook as netfilter calls the base chains: prerouting (or output for
// the node's own packets), then input or forward as routing decides
// after DNAT, then postrouting. Every random choice forks the walk.
func Trace(src Source, p trace.Packet, env trace.Env) *trace.Result {
	p.Proto = strings.ToLower(p.Proto)
	w := &walker{src: src, env: env, pkt: p, table: src.Family().String() + " " + TableName}
	res := &trace.Result{Packet: p}
	start := trace.Flow{Prob: 1, Dst: p.Dst}
	first := []string{ChainFilterPreroutingPreDNAT, ChainNATPrerouting}
	if p.Local {
		first = []string{ChainFilterOutputPreDNAT, ChainNATOutput, ChainFilterOutput}
	}
	for _, o := range w.hook(first, start) {
		if o.Verdict != "ACCEPT" {
			res.Paths = append(res.Paths, o.Path())
			continue
		}
		var next []string
		switch {
		case p.Local:
			next = []string{ChainNATPostrouting}
		case w.isLocal(o.Dst.Addr()):
			next = []string{ChainFilterInput}
		default:
			next = []string{ChainFilterForward, ChainNATPostrouting}
		}
		for _, n := range w.hook(next, o.Flow.Fork()) {
			res.Paths = append(res.Paths, n.Path())
		}
	}
	res.Warnings = w.warnings
	return res
}

type walker struct {
	src      Source
	env      trace.Env
	pkt      trace.Packet
	table    string
	warnings []string
}

func (w *walker) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !slices.Contains(w.warnings, msg) {
		w.warnings = append(w.warnings, msg)
	}
}

// hook runs base chains one after the other; each accepts (or falls
// through to its accept policy) into the next.
func (w *walker) hook(chains []string, f trace.Flow) []trace.Ended {
	outs := []trace.Ended{{Flow: f, Verdict: "ACCEPT"}}
	for _, name := range chains {
		var next []trace.Ended
		for _, o := range outs {
			if o.Verdict != "ACCEPT" {
				next = append(next, o)
				continue
			}
			c, err := w.src.Chain(name)
			if err != nil {
				w.warn("%v", err)
				next = append(next, o)
				continue
			}
			for _, r := range w.walk(c, 0, o.Flow, 0) {
				if r.Verdict == "RETURN" {
					r.Verdict = "ACCEPT"
				}
				next = append(next, r)
			}
		}
		outs = next
	}
	return outs
}

// walk evaluates chain c from rule i on.
func (w *walker) walk(c *nft.Chain, i int, f trace.Flow, depth int) []trace.Ended {
	if depth > maxDepth {
		w.warn("chains nest deeper than %d at %s; giving up on that path", maxDepth, c.Name)
		return []trace.Ended{{Flow: f, Verdict: "DROP"}}
	}
	if i >= len(c.Rules) {
		return []trace.Ended{{Flow: f, Verdict: "RETURN"}}
	}
	return w.stmts(c, i, c.Rules[i].Stmts, f.Fork(), depth)
}

func (w *walker) step(c *nft.Chain, i int, note string) trace.Step {
	return trace.Step{Table: w.table, Chain: c.Name, Note: note,
		Rule: &trace.Rule{Chain: c.Name, Num: i + 1, Text: c.Rules[i].Format(w.src.Family())}}
}

// stmts evaluates the statements ss of rule i of c on f, then the rest
// of the chain as the rule's outcome requires: a failed match goes on
// with the next rule (with what the statements before it changed, as in
// the kernel), a verdict ends the chain or enters another, and a rule
// that runs to its end goes on with the next rule.
func (w *walker) stmts(c *nft.Chain, i int, ss []nft.Stmt, f trace.Flow, depth int) []trace.Ended {
	cont := func(f trace.Flow) []trace.Ended { return w.walk(c, i+1, f, depth) }
	for k, s := range ss {
		switch s := s.(type) {
		case nft.MatchAddr:
			if s.Prefix.Contains(w.addr(s.Src, f)) == s.Neg {
				return cont(f)
			}
		case nft.MatchAddrSet:
			if w.inSet(s.Set, w.addr(s.Src, f)) == s.Neg {
				return cont(f)
			}
		case nft.MatchAddrList:
			a := w.addr(s.Src, f)
			if slices.ContainsFunc(s.Prefixes, func(p netip.Prefix) bool { return p.Contains(a) }) == s.Neg {
				return cont(f)
			}
		case nft.MatchProto:
			if s.Proto.String() != w.pkt.Proto {
				return cont(f)
			}
		case nft.MatchDport:
			if s.Port != f.Dst.Port() {
				return cont(f)
			}
		case nft.MatchFibLocal:
			if w.isLocal(w.addr(s.Src, f)) == s.Neg {
				return cont(f)
			}
		case nft.MatchCtNew:
			// The traced packet is a connection's first.
		case nft.MatchMarkSet:
			if f.Mark&s.Mark == 0 {
				return cont(f)
			}
		case nft.MatchCtStatusDNAT:
			if !f.DNAT {
				return cont(f)
			}
		case nft.MatchConnSet:
			if !w.inConnSet(s.Set, f) {
				return cont(f)
			}
		case nft.SetMark:
			if s.Xor {
				f.Mark ^= s.Mark
			} else {
				f.Mark |= s.Mark
			}
		case nft.VmapLookup:
			v, ok := w.lookup(s, f)
			if !ok {
				return cont(f)
			}
			f.Steps = append(f.Steps, w.step(c, i, "matched "+v.String()))
			return w.verdict(c, i, v, f, depth, cont)
		case nft.Numgen:
			return draw(f, len(s.Targets), func(n int, g trace.Flow, note string) []trace.Ended {
				g.Steps = append(g.Steps, w.step(c, i, note))
				return w.verdict(c, i, nft.Verdict{Kind: nft.Goto, Chain: s.Targets[n]}, g, depth, cont)
			})
		case nft.DNATMap:
			return draw(f, len(s.To), func(n int, g trace.Flow, note string) []trace.Ended {
				g.Dst, g.DNAT = s.To[n], true
				if k+1 < len(ss) { // statements after the DNAT: their step ends the rule
					g.Steps = append(g.Steps, trace.Step{Table: w.table, Chain: c.Name, Note: note})
					return w.stmts(c, i, ss[k+1:], g, depth)
				}
				g.Steps = append(g.Steps, w.step(c, i, note))
				return cont(g)
			})
		case nft.UpdateSrcSet:
			f.RecentSet = append(f.RecentSet, s.Set)
		case nft.DNAT:
			f.Dst, f.DNAT = s.To, true
		case nft.Masquerade:
			f.Masq = true
		case nft.Reject:
			f.Steps = append(f.Steps, w.step(c, i, ""))
			return []trace.Ended{{Flow: f, Verdict: "REJECT"}}
		case nft.Verdict:
			f.Steps = append(f.Steps, w.step(c, i, ""))
			return w.verdict(c, i, s, f, depth, cont)
		default:
			w.warn("cannot trace %T", s)
			return cont(f)
		}
	}
	f.Steps = append(f.Steps, w.step(c, i, ""))
	return cont(f)
}

// draw forks f into the n equally likely outcomes of a random choice
// and runs each through then, with the note that names it.
func draw(f trace.Flow, n int, then func(i int, g trace.Flow, note string) []trace.Ended) []trace.Ended {
	var outs []trace.Ended
	p := 1 / float64(n)
	for i := range n {
		g := f.Fork()
		g.Prob *= p
		outs = append(outs, then(i, g, fmt.Sprintf("random %d of %d (probability %s)", i, n, fmtProb(p)))...)
	}
	return outs
}

func fmtProb(p float64) string { return strconv.FormatFloat(p, 'f', 10, 64) }

// verdict applies v, reached by rule i of c; cont continues c after it.
func (w *walker) verdict(c *nft.Chain, i int, v nft.Verdict, f trace.Flow, depth int, cont func(trace.Flow) []trace.Ended) []trace.Ended {
	switch v.Kind {
	case nft.Accept:
		return []trace.Ended{{Flow: f, Verdict: "ACCEPT"}}
	case nft.Drop:
		return []trace.Ended{{Flow: f, Verdict: "DROP"}}
	case nft.Return:
		return []trace.Ended{{Flow: f, Verdict: "RETURN"}}
	}
	target, err := w.src.Chain(v.Chain)
	if err != nil {
		w.warn("%s rule %d: %v", c.Name, i+1, err)
		return []trace.Ended{{Flow: f, Verdict: "DROP"}}
	}
	outs := w.walk(target, 0, f, depth+1)
	if v.Kind == nft.Goto {
		return outs // the target's return is the caller's
	}
	var all []trace.Ended
	for _, o := range outs {
		if o.Verdict == "RETURN" {
			all = append(all, cont(o.Flow)...)
		} else {
			all = append(all, o)
		}
	}
	return all
}

func (w *walker) addr(src bool, f trace.Flow) netip.Addr {
	if src {
		return w.pkt.Src
	}
	return f.Dst.Addr()
}

func (w *walker) isLocal(a netip.Addr) bool {
	return a.IsLoopback() || slices.Contains(w.env.LocalAddrs, a)
}

func (w *walker) inSet(set string, a netip.Addr) bool {
	elems, err := w.src.Elements(set)
	if err != nil {
		w.warn("%v", err)
		return false
	}
	for _, e := range elems {
		// A built table's affinity set stands for "holds the source".
		if e.Key.Addr == a || (!e.Key.Addr.IsValid() && strings.HasPrefix(set, PrefixAffinity)) {
			return true
		}
	}
	return false
}

// inConnSet says whether the packet's connection (its source, its
// destination after DNAT, protocol and port) is in a KeyConn set.
func (w *walker) inConnSet(set string, f trace.Flow) bool {
	elems, err := w.src.Elements(set)
	if err != nil {
		w.warn("%v", err)
		return false
	}
	proto, err := nft.ParseProto(w.pkt.Proto)
	if err != nil {
		return false
	}
	key := nft.Key{Addr: w.pkt.Src, Addr2: f.Dst.Addr(), Proto: proto, Port: f.Dst.Port()}
	return slices.ContainsFunc(elems, func(e nft.Element) bool { return e.Key == key })
}

func (w *walker) lookup(s nft.VmapLookup, f trace.Flow) (nft.Verdict, bool) {
	elems, err := w.src.Elements(s.Map)
	if err != nil {
		w.warn("%v", err)
		return nft.Verdict{}, false
	}
	proto, err := nft.ParseProto(w.pkt.Proto)
	if err != nil {
		return nft.Verdict{}, false
	}
	key := nft.Key{Proto: proto, Port: f.Dst.Port()}
	if s.Daddr {
		key.Addr = f.Dst.Addr()
	}
	for _, e := range elems {
		if e.Key == key {
			return e.Verdict, true
		}
	}
	return nft.Verdict{}, false
}
