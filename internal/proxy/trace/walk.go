package trace

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Packet is the first packet of a new connection: only it traverses the
// nat chains, and the rest of the connection follows its fate.
type Packet struct {
	Src     netip.Addr
	SrcPort uint16
	Dst     netip.AddrPort
	Proto   string // tcp, udp or sctp
	// Local says the packet is sent by a process on the node (hook
	// OUTPUT); otherwise it arrives from the network or from a pod on the
	// node (hook PREROUTING).
	Local bool
}

func (p Packet) String() string {
	from := "arriving at the node"
	if p.Local {
		from = "sent by the node"
	}
	return fmt.Sprintf("%s -> %s/%s, %s", netip.AddrPortFrom(p.Src, p.SrcPort), p.Dst, p.Proto, from)
}

// Env is what the walker knows about the node.
type Env struct {
	// LocalAddrs are the node's own addresses (what addrtype LOCAL
	// matches, besides loopback).
	LocalAddrs []netip.Addr
	// Recent names the recent lists (kube-proxy uses KUBE-SEP- chain
	// names) that already hold the packet's source: session affinity
	// established by earlier connections.
	Recent map[string]bool
}

// Step is one rule a packet matched, or a note on one it did not.
type Step struct {
	Table string
	Chain string
	Rule  *Rule  // nil when the chain's policy decided
	Note  string // e.g. "random 0.3333333333: taken"
}

// Path is one way the packet may go, with its probability.
type Path struct {
	Probability float64
	Steps       []Step
	Verdict     string         // ACCEPT, DROP or REJECT
	Dst         netip.AddrPort // destination after DNAT
	DNAT        bool
	Masquerade  bool
	RecentSet   []string // recent lists the packet adds its source to
}

// Result is the outcome of a trace.
type Result struct {
	Packet   Packet
	Paths    []Path
	Warnings []string
}

// Outcome aggregates the paths that end alike.
type Outcome struct {
	Verdict     string
	Dst         netip.AddrPort
	DNAT        bool
	Masquerade  bool
	Probability float64
}

// Outcomes sums path probabilities per verdict, destination and
// masquerading, ordered by destination.
func (r *Result) Outcomes() []Outcome {
	var out []Outcome
	for _, p := range r.Paths {
		o := Outcome{Verdict: p.Verdict, Dst: p.Dst, DNAT: p.DNAT, Masquerade: p.Masquerade}
		i := slices.IndexFunc(out, func(x Outcome) bool {
			return x.Verdict == o.Verdict && x.Dst == o.Dst && x.DNAT == o.DNAT && x.Masquerade == o.Masquerade
		})
		if i < 0 {
			out = append(out, o)
			i = len(out) - 1
		}
		out[i].Probability += p.Probability
	}
	slices.SortFunc(out, func(a, b Outcome) int {
		return cmp.Or(strings.Compare(a.Verdict, b.Verdict), a.Dst.Compare(b.Dst))
	})
	return out
}

// maxDepth bounds chain nesting; kube-proxy's rules nest 5 deep.
const maxDepth = 32

type walker struct {
	rs       *Ruleset
	env      Env
	pkt      Packet
	warnings []string
}

// Flow is the state of one branch of a walk through a node's rules, in
// the iptables walker here and the nftables one: how likely the branch
// is, where the packet goes (after DNAT), its mark, whether it is
// masqueraded, the steps so far and the affinity sets it was added to.
type Flow struct {
	Prob      float64
	Dst       netip.AddrPort
	DNAT      bool
	Mark      uint32
	Masq      bool
	Steps     []Step
	RecentSet []string
}

// Fork copies f for a branch of its own: branches share no steps.
func (f Flow) Fork() Flow {
	f.Steps = slices.Clone(f.Steps)
	f.RecentSet = slices.Clone(f.RecentSet)
	return f
}

// Ended is a flow at the end of a chain and the verdict it ended with.
type Ended struct {
	Flow
	Verdict string // ACCEPT, DROP, REJECT, or RETURN when a chain fell through
}

// Path is the outcome as a Result reports it.
func (o Ended) Path() Path {
	return Path{Probability: o.Prob, Steps: o.Steps, Verdict: o.Verdict, Dst: o.Dst, DNAT: o.DNAT,
		Masquerade: o.Masq, RecentSet: o.RecentSet}
}

// Trace walks p through rs: nat PREROUTING (or OUTPUT), the filter chain
// the routing decision picks, then nat POSTROUTING (or INPUT).
func Trace(rs *Ruleset, p Packet, env Env) *Result {
	p.Proto = strings.ToLower(p.Proto)
	w := &walker{rs: rs, env: env, pkt: p}
	res := &Result{Packet: p}
	start := Flow{Prob: 1, Dst: p.Dst}
	natIn := "PREROUTING"
	if p.Local {
		natIn = "OUTPUT"
	}
	for _, o := range w.builtin("nat", natIn, start) {
		if o.Verdict != "ACCEPT" {
			res.Paths = append(res.Paths, o.Path())
			continue
		}
		toNode := w.isLocal(o.Dst.Addr())
		filterChain, natOut := "FORWARD", "POSTROUTING"
		switch {
		case p.Local:
			filterChain = "OUTPUT"
		case toNode:
			filterChain, natOut = "INPUT", "INPUT"
		}
		for _, fo := range w.builtin("filter", filterChain, o.Flow.Fork()) {
			if fo.Verdict != "ACCEPT" {
				res.Paths = append(res.Paths, fo.Path())
				continue
			}
			for _, po := range w.builtin("nat", natOut, fo.Flow.Fork()) {
				res.Paths = append(res.Paths, po.Path())
			}
		}
	}
	res.Warnings = w.warnings
	return res
}

// builtin walks a built-in chain; a missing table or chain accepts.
func (w *walker) builtin(table, chain string, f Flow) []Ended {
	t := w.rs.Tables[table]
	if t == nil || t.Chains[chain] == nil {
		return []Ended{{Flow: f, Verdict: "ACCEPT"}}
	}
	c := t.Chains[chain]
	outs := w.walkFrom(t, c, 0, f, 0)
	for i := range outs {
		if outs[i].Verdict == "RETURN" {
			policy := cmp.Or(c.Policy, "ACCEPT")
			outs[i].Steps = append(outs[i].Steps, Step{Table: table, Chain: chain, Note: "policy " + policy})
			outs[i].Verdict = policy
		}
	}
	return outs
}

func (w *walker) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !slices.Contains(w.warnings, msg) {
		w.warnings = append(w.warnings, msg)
	}
}

// walkFrom evaluates chain c from rule i on. Random matches fork the
// flow; every fork is followed to its end.
func (w *walker) walkFrom(t *Table, c *Chain, i int, f Flow, depth int) []Ended {
	if depth > maxDepth {
		w.warn("chains nest deeper than %d at %s; giving up on that path", maxDepth, c.Name)
		return []Ended{{Flow: f, Verdict: "DROP"}}
	}
	for ; i < len(c.Rules); i++ {
		r := c.Rules[i]
		p, note := w.match(r, &f)
		if p <= 0 {
			if note != "" {
				f.Steps = append(f.Steps, Step{Table: t.Name, Chain: c.Name, Rule: r, Note: note})
			}
			continue
		}
		if p < 1 {
			skip := f.Fork()
			skip.Prob *= 1 - p
			skip.Steps = append(skip.Steps, Step{Table: t.Name, Chain: c.Name, Rule: r, Note: fmt.Sprintf("random %s: not taken", fmtProb(p))})
			taken := f.Fork()
			taken.Prob *= p
			taken.Steps = append(taken.Steps, Step{Table: t.Name, Chain: c.Name, Rule: r, Note: fmt.Sprintf("random %s: taken", fmtProb(p))})
			outs := w.target(t, c, i, r, taken, depth)
			return append(outs, w.walkFrom(t, c, i+1, skip, depth)...)
		}
		f.Steps = append(f.Steps, Step{Table: t.Name, Chain: c.Name, Rule: r, Note: note})
		return w.target(t, c, i, r, f, depth)
	}
	return []Ended{{Flow: f, Verdict: "RETURN"}}
}

// target applies r's target to f, which matched it, and continues the
// walk of c after r where the target does not end it.
func (w *walker) target(t *Table, c *Chain, i int, r *Rule, f Flow, depth int) []Ended {
	next := func(f Flow) []Ended { return w.walkFrom(t, c, i+1, f, depth) }
	if r.recent != nil && r.recent.set {
		f.RecentSet = append(f.RecentSet, r.recent.name)
	}
	switch r.Target {
	case "":
		return next(f)
	case "ACCEPT", "DROP", "REJECT", "RETURN":
		return []Ended{{Flow: f, Verdict: r.Target}}
	case "MARK":
		if r.hasSetMark {
			f.Mark = (f.Mark &^ r.setMarkMask) ^ r.setMark
		}
		f.Mark = (f.Mark | r.orMark) ^ r.xorMark
		return next(f)
	case "LOG":
		return next(f)
	case "DNAT":
		dst, ok := parseDestination(r.toDestination, f.Dst.Port())
		if !ok {
			w.warn("rule %s #%d: cannot read --to-destination %q", c.Name, r.Num, r.toDestination)
			return []Ended{{Flow: f, Verdict: "DROP"}}
		}
		f.Dst, f.DNAT = dst, true
		return []Ended{{Flow: f, Verdict: "ACCEPT"}}
	case "REDIRECT":
		// To the node itself: loopback for its own traffic, else the
		// address the packet arrived on (we take the first local one).
		port, err := strconv.ParseUint(strings.Split(r.toPorts, "-")[0], 10, 16)
		if r.toPorts == "" {
			port, err = uint64(f.Dst.Port()), nil
		}
		to := netip.MustParseAddr("127.0.0.1")
		if f.Dst.Addr().Is6() {
			to = netip.IPv6Loopback()
		}
		if !w.pkt.Local {
			if i := slices.IndexFunc(w.env.LocalAddrs, func(a netip.Addr) bool { return a.Is4() == f.Dst.Addr().Is4() }); i >= 0 {
				to = w.env.LocalAddrs[i]
			}
		}
		if err != nil {
			w.warn("rule %s #%d: cannot read --to-ports %q", c.Name, r.Num, r.toPorts)
			return []Ended{{Flow: f, Verdict: "DROP"}}
		}
		f.Dst, f.DNAT = netip.AddrPortFrom(to, uint16(port)), true
		return []Ended{{Flow: f, Verdict: "ACCEPT"}}
	case "MASQUERADE", "SNAT":
		f.Masq = true
		return []Ended{{Flow: f, Verdict: "ACCEPT"}}
	}
	sub := t.Chains[r.Target]
	if sub == nil {
		w.warn("rule %s #%d jumps to %s, which is not in the dump", c.Name, r.Num, r.Target)
		return next(f)
	}
	var outs []Ended
	for _, o := range w.walkFrom(t, sub, 0, f, depth+1) {
		if o.Verdict != "RETURN" {
			outs = append(outs, o)
		} else if r.Goto {
			outs = append(outs, o) // -g returns to our caller
		} else {
			outs = append(outs, next(o.Flow.Fork())...)
		}
	}
	return outs
}

// match returns the probability that r matches f, and a note for the
// trace where the answer is worth explaining.
func (w *walker) match(r *Rule, f *Flow) (float64, string) {
	if len(r.Unsupported) > 0 {
		w.warn("rule %s #%d uses %s, which the tracer cannot evaluate; treated as not matching",
			r.Chain, r.Num, strings.Join(r.Unsupported, ", "))
		return 0, ""
	}
	if r.proto != "" && r.proto != "all" && (r.proto == w.pkt.Proto) == r.protoNeg {
		return 0, ""
	}
	if r.src != nil && r.src.prefix.Contains(w.pkt.Src) == r.src.neg {
		return 0, ""
	}
	if r.dst != nil && r.dst.prefix.Contains(f.Dst.Addr()) == r.dst.neg {
		return 0, ""
	}
	if r.dport != nil && (f.Dst.Port() >= r.dport.lo && f.Dst.Port() <= r.dport.hi) == r.dport.neg {
		return 0, ""
	}
	if r.sport != nil && (w.pkt.SrcPort >= r.sport.lo && w.pkt.SrcPort <= r.sport.hi) == r.sport.neg {
		return 0, ""
	}
	if r.srcType != nil && w.isLocal(w.pkt.Src) == r.srcType.neg {
		return 0, ""
	}
	if r.dstType != nil && w.isLocal(f.Dst.Addr()) == r.dstType.neg {
		return 0, ""
	}
	if r.mark != nil && (f.Mark&r.mark.mask == r.mark.value) == r.mark.neg {
		return 0, ""
	}
	if r.ctstate != nil {
		in := slices.Contains(r.ctstate.states, "NEW") || (f.DNAT && slices.Contains(r.ctstate.states, "DNAT"))
		if in == r.ctstate.neg {
			return 0, ""
		}
	}
	if r.recent != nil && r.recent.check {
		if !w.env.Recent[r.recent.name] {
			return 0, fmt.Sprintf("affinity: source not in recent list %s (seen within %ds it would go there)", r.recent.name, r.recent.seconds)
		}
		return 1, fmt.Sprintf("affinity: source in recent list %s", r.recent.name)
	}
	if r.probability >= 0 {
		return min(r.probability, 1), ""
	}
	return 1, ""
}

func (w *walker) isLocal(a netip.Addr) bool {
	return a.IsLoopback() || slices.Contains(w.env.LocalAddrs, a)
}

// parseDestination reads a DNAT --to-destination: "ip", "ip:port" or
// "[ip6]:port".
func parseDestination(s string, port uint16) (netip.AddrPort, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, true
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return netip.AddrPortFrom(a, port), true
	}
	return netip.AddrPort{}, false
}

func fmtProb(p float64) string { return strconv.FormatFloat(p, 'f', -1, 64) }
