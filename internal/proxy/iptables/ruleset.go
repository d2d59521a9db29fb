package iptables

import (
	"bytes"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/svcstate"
)

// State is what one rule set leaves for building the next: each service
// port's rendered fragment. It is immutable once built.
type State struct {
	cfg          Config
	fragments    map[svcstate.ServicePortName]*fragment
	order        []svcstate.ServicePortName // sorted keys of fragments
	endpoints    int                        // of the family, over all ports
	largeCluster bool
}

// Input is what a rule set is built from.
type Input struct {
	Snapshot *svcstate.Snapshot
	// Changed lists the service ports that changed since Previous was
	// built (svcstate.Changes.Ports, merged over failed syncs). Only their
	// chains are written in a partial sync.
	Changed map[svcstate.ServicePortName]struct{}
	// Previous is the state of the rule set last applied successfully;
	// nil when nothing was (which forces a full sync).
	Previous *State
	// Full asks for every chain to be written, repairing whatever was
	// changed behind our back.
	Full bool
	// ExistingNATChains are the nat chains iptables-save reported before a
	// full sync; service chains among them that the rule set no longer
	// needs are deleted. Ignored in partial syncs, which know what they
	// remove from Previous.
	ExistingNATChains []string
	// EditTopLevel makes a partial sync edit the top-level chains
	// (KUBE-SERVICES, KUBE-NODEPORTS, the filter chains) rule by rule
	// instead of rewriting them. A one-endpoint change then costs a few
	// lines instead of one line per service port, which matters because
	// iptables-restore --noflush gets slower with input size faster than
	// linearly. Rules then sit in a different order in those chains than a
	// full sync would put them, which changes no packet's fate: their
	// matches are disjoint, and the node-port jump stays last. If the
	// kernel's chains differ from what Previous says (someone flushed
	// them), a -D fails, the restore fails atomically, and the next sync
	// is full.
	EditTopLevel bool
	// MaxChainsPerRestore splits a rule set that declares more per-service
	// chains than this into several restores (0: never split). The nft
	// backend of iptables-restore --noflush spends time proportional to
	// lines × distinct chains in one input, so 430,000 lines in one
	// restore take most of an hour while a hundred restores of ~1,000
	// chains take seconds. See RuleSet.Restores for what a split costs.
	MaxChainsPerRestore int
}

// Stats describe a rule set.
type Stats struct {
	ServicePorts        int // ports proxied in the family
	Endpoints           int // endpoints reachable through the rules
	FilterRules         int
	NATRules            int // rules in the kernel after the restore
	NATRulesWritten     int // rules in this restore
	NATChainsWritten    int // per-service chains in this restore
	StaleChains         int
	NoLocalInternal     int // ports with internalTrafficPolicy Local and no local endpoint
	NoLocalExternal     int // ports with externalTrafficPolicy Local and no local endpoint
	ServicePortsWritten int
}

// RuleSet is the outcome of Build: iptables-restore input for the filter
// and nat tables, meant for `iptables-restore --noflush`, and the state to
// build the next one from once it is applied.
type RuleSet struct {
	// Restores are the inputs to apply, in order. There is one unless
	// Input.MaxChainsPerRestore split the rule set. A split one is
	// ordered so that every state in between is coherent: first the
	// filter table and the fixed nat chains, then the per-service chains
	// (each port's chains in one restore, none referenced yet if new),
	// then the top-level chains that jump to them, then the stale chains,
	// referrers before the chains they refer to. Packets meanwhile see
	// each service either as before or as after, never half of one.
	Restores [][]byte
	// Data is the only restore when there is one, nil otherwise.
	Data        []byte
	Full        bool
	StaleChains []string // deleted by Data
	Stats       Stats
	State       *State
}

// Build computes the rule set for in.Snapshot. It is a pure function: the
// same input gives the same bytes. A full build writes every chain. A
// partial one writes the chains of the ports in in.Changed, and either
// rewrites the top-level chains (one rule per address of every port) or,
// with in.EditTopLevel, edits only the changed ports' rules in them.
// Either way, only changed ports are rendered: the others' fragments are
// reused from in.Previous.
func Build(cfg Config, in Input) *RuleSet {
	cfg = cfg.withDefaults()
	prev := in.Previous
	// A different config may change any rule, including the fixed ones
	// that an editing sync never rewrites.
	rerenderAll := prev == nil || !sameConfig(prev.cfg, cfg)
	full := in.Full || rerenderAll
	st := &State{cfg: cfg, fragments: map[svcstate.ServicePortName]*fragment{}}
	if !rerenderAll {
		st.endpoints = prev.endpoints
		st.largeCluster = prev.largeCluster
	}

	// Decide which ports to render: all of them on the first build or
	// when the config changed, else the changed ones.
	renderPort := func(n svcstate.ServicePortName) *fragment {
		sp, eps := in.Snapshot.Port(n)
		if sp == nil {
			return nil
		}
		sp = sp.ForFamily(cfg.Family)
		return render(&cfg, sp, familyEndpoints(eps, cfg), st.largeCluster)
	}
	if rerenderAll {
		st.endpoints = 0
		for svc := range in.Snapshot.All {
			for _, p := range svc.Ports {
				if p.ClusterIP(cfg.Family).IsValid() {
					st.endpoints += len(familyEndpoints(svc.Endpoints(p.Name), cfg))
				}
			}
		}
		st.largeCluster = cfg.LargeClusterEndpoints > 0 && st.endpoints > cfg.LargeClusterEndpoints
		for svc := range in.Snapshot.All {
			for _, p := range svc.Ports {
				if f := renderPort(p.Name); f != nil {
					st.fragments[p.Name] = f
				}
			}
		}
	} else {
		for n, f := range prev.fragments {
			st.fragments[n] = f
		}
		for n := range in.Changed {
			if old := prev.fragments[n]; old != nil {
				st.endpoints -= old.endpoints
			}
			delete(st.fragments, n)
			if f := renderPort(n); f != nil {
				st.fragments[n] = f
				st.endpoints += f.endpoints
			}
		}
		if large := cfg.LargeClusterEndpoints > 0 && st.endpoints > cfg.LargeClusterEndpoints; large != st.largeCluster {
			// Comments come and go with the mode: every chain changes.
			st.largeCluster = large
			for n := range st.fragments {
				if f := renderPort(n); f != nil {
					st.fragments[n] = f
				}
			}
			full = true
		}
	}
	st.order = sortedKeys(st.fragments, prev, in.Changed, rerenderAll)

	// Which chains get written, and which go away. A partial sync writes
	// only the chains whose rules changed: when one endpoint goes, that
	// is the KUBE-SVC- chain, not the other endpoints' KUBE-SEP- chains.
	write := func(f *fragment) *fragment {
		if full {
			return f
		}
		if _, changed := in.Changed[f.name]; !changed {
			return nil
		}
		return f.changedChains(prev.fragments[f.name])
	}
	// Stale chains: in a full sync, every service chain not in use; in a
	// partial one, the chains a changed port had and no longer has (chain
	// names hash the port's name, so no other port can be using them).
	var stale []string
	if full {
		active := map[string]bool{}
		for _, f := range st.fragments {
			for _, c := range f.chains {
				active[c] = true
			}
		}
		add := func(c string) {
			if !active[c] && IsServiceChain(c) {
				active[c] = true // once
				stale = append(stale, c)
			}
		}
		for _, c := range in.ExistingNATChains {
			add(c)
		}
		if prev != nil {
			for _, f := range prev.fragments {
				for _, c := range f.chains {
					add(c)
				}
			}
		}
	} else {
		for n := range in.Changed {
			old := prev.fragments[n]
			if old == nil {
				continue
			}
			var now []string
			if f := st.fragments[n]; f != nil {
				now = f.chains
			}
			for _, c := range old.chains {
				if !slices.Contains(now, c) {
					stale = append(stale, c)
				}
			}
		}
	}
	slices.Sort(stale)

	var edit *editPlan
	if !full && in.EditTopLevel {
		edit = &editPlan{}
		names := slices.SortedFunc(maps.Keys(in.Changed), svcstate.ServicePortName.Compare)
		for _, n := range names {
			if old, cur := prev.fragments[n], st.fragments[n]; old != nil || cur != nil {
				edit.diffs = append(edit.diffs, portDiff{old: old, cur: cur})
			}
		}
	}
	return assemble(&cfg, st, full, write, stale, edit, in.MaxChainsPerRestore)
}

func sameConfig(a, b Config) bool {
	return a.NodeConfig.Equal(b.NodeConfig) && a.LocalhostNodePorts == b.LocalhostNodePorts &&
		a.ConntrackTCPLiberal == b.ConntrackTCPLiberal && a.InvalidCounter == b.InvalidCounter &&
		a.LargeClusterEndpoints == b.LargeClusterEndpoints
}

func familyEndpoints(eps []svcstate.Endpoint, cfg Config) []svcstate.Endpoint {
	for i := range eps {
		if svcstate.Family(eps[i].IP) != cfg.Family {
			out := slices.Clone(eps[:i])
			for _, e := range eps[i+1:] {
				if svcstate.Family(e.IP) == cfg.Family {
					out = append(out, e)
				}
			}
			return out
		}
	}
	return eps // all of the family: share, don't copy
}

// sortedKeys returns the ports of st in order, reusing the previous order
// when no port came or went.
func sortedKeys(frags map[svcstate.ServicePortName]*fragment, prev *State, changed map[svcstate.ServicePortName]struct{}, all bool) []svcstate.ServicePortName {
	if !all && prev != nil && len(prev.order) == len(frags) {
		same := true
		for n := range changed {
			_, now := frags[n]
			_, before := prev.fragments[n]
			if now != before {
				same = false
				break
			}
		}
		if same {
			return prev.order
		}
	}
	keys := make([]svcstate.ServicePortName, 0, len(frags))
	for n := range frags {
		keys = append(keys, n)
	}
	slices.SortFunc(keys, svcstate.ServicePortName.Compare)
	return keys
}

// assemble writes the restore input. A full or rewriting sync declares
// the top-level chains (which flushes them) and refills them; an editing
// sync (edit != nil) leaves them in place and deletes and inserts only the
// rules of the changed ports. Either way it declares the per-service
// chains it writes, writes their rules, and deletes stale chains last,
// when nothing refers to them any more.
func assemble(cfg *Config, st *State, full bool, write func(*fragment) *fragment, stale []string, edit *editPlan, maxChains int) *RuleSet {
	rs := &RuleSet{Full: full, StaleChains: stale, State: st}
	ordered := make([]*fragment, len(st.order))
	for i, n := range st.order {
		ordered[i] = st.fragments[n]
	}
	w := &restoreWriter{}
	mark := cfg.mark()
	fixedFilter := fixedFilterRules(cfg, mark)
	fixedNAT := fixedNATRules(cfg, mark)
	nodePorts := nodePortsJumps(cfg)

	var written []*fragment
	for _, f := range ordered {
		rs.Stats.ServicePorts++
		rs.Stats.Endpoints += f.reachable
		rs.Stats.NATRules += f.topRules() + len(f.rules)
		rs.Stats.FilterRules += f.filterRules()
		if f.noLocalInternal {
			rs.Stats.NoLocalInternal++
		}
		if f.noLocalExternal {
			rs.Stats.NoLocalExternal++
		}
		if wf := write(f); wf != nil {
			written = append(written, wf)
			rs.Stats.NATChainsWritten += len(wf.chains)
		}
	}
	rs.Stats.FilterRules += len(fixedFilter)
	rs.Stats.NATRules += len(fixedNAT) + len(nodePorts)
	rs.Stats.ServicePortsWritten = len(written)
	rs.Stats.StaleChains = len(stale)
	if maxChains > 0 && rs.Stats.NATChainsWritten+len(stale) > maxChains {
		assembleSplit(rs, cfg, ordered, written, stale, edit, maxChains)
		return rs
	}

	writeFilter(w, cfg, ordered, edit)

	// nat
	w.line("*nat")
	natRulesBefore := w.r
	if edit == nil {
		w.chain(ChainServices, ChainNodePorts, ChainPostrouting, ChainMarkMasq)
	}
	for _, f := range written {
		w.chain(f.chains...)
	}
	w.chain(stale...)
	if edit == nil {
		w.lines(fixedNAT)
	}
	writeServiceJumps(w, ordered, nodePorts, edit)
	for _, f := range written {
		w.lines(f.rules)
	}
	for _, c := range stale {
		w.line("-X " + c)
	}
	rs.Stats.NATRulesWritten = w.r - natRulesBefore
	w.line("COMMIT")
	rs.Data = w.b.Bytes()
	rs.Restores = [][]byte{rs.Data}
	return rs
}

// writeFilter writes the filter table, complete or as edits; edits that
// leave the table alone write nothing, which spares iptables-restore a
// transaction.
func writeFilter(w *restoreWriter, cfg *Config, ordered []*fragment, edit *editPlan) {
	if edit != nil && !edit.touchesFilter() {
		return
	}
	w.line("*filter")
	if edit == nil {
		w.chain(ChainServices, ChainExternalServices, ChainForward, ChainNodePorts, ChainProxyFirewall)
		if cfg.LocalhostNodePorts {
			w.chain(ChainKubeletFirewall)
		}
		for _, f := range ordered {
			w.lines(f.filterServices, f.filterExternal, f.filterNodePort, f.filterFirewall)
		}
		w.lines(fixedFilterRules(cfg, cfg.mark()))
	} else {
		for _, d := range edit.diffs {
			w.edit(d.old.filterAll(), d.cur.filterAll(), "")
		}
	}
	w.line("COMMIT")
}

// assembleSplit writes rs as several restores of at most maxChains
// per-service chains each (a port with more chains gets a restore of its
// own), in the order RuleSet.Restores describes.
func assembleSplit(rs *RuleSet, cfg *Config, ordered, written []*fragment, stale []string, edit *editPlan, maxChains int) {
	natRules := 0
	add := func(w *restoreWriter, natFrom int) {
		natRules += w.r - natFrom
		rs.Restores = append(rs.Restores, w.b.Bytes())
	}

	// The filter table refers to no nat chain; the service chains need
	// KUBE-MARK-MASQ, which a first sync has yet to create.
	w := &restoreWriter{}
	writeFilter(w, cfg, ordered, edit)
	natFrom := w.r
	if edit == nil {
		w.line("*nat")
		w.chain(ChainPostrouting, ChainMarkMasq)
		w.lines(fixedNATRules(cfg, cfg.mark()))
		w.line("COMMIT")
	}
	add(w, natFrom)

	// Per-service chains: declarations first, as iptables-restore wants.
	var decl, rules []string
	flush := func() {
		if len(decl) == 0 {
			return
		}
		w := &restoreWriter{}
		w.line("*nat")
		w.chain(decl...)
		w.lines(rules)
		w.line("COMMIT")
		add(w, 0)
		decl, rules = decl[:0], rules[:0]
	}
	for _, f := range written {
		if len(decl) > 0 && len(decl)+len(f.chains) > maxChains {
			flush()
		}
		decl = append(decl, f.chains...)
		rules = append(rules, f.rules...)
	}
	flush()

	// The top-level chains, now that every chain they jump to exists.
	w = &restoreWriter{}
	w.line("*nat")
	if edit == nil {
		w.chain(ChainServices, ChainNodePorts)
	}
	writeServiceJumps(w, ordered, nodePortsJumps(cfg), edit)
	if len(stale) <= maxChains {
		w.chain(stale...)
		for _, c := range stale {
			w.line("-X " + c)
		}
		stale = nil
	}
	w.line("COMMIT")
	add(w, 0)

	// Stale chains in order of reference: a chain is flushed in the same
	// restore as, or an earlier one than, the chains it jumps to.
	stale = slices.Clone(stale)
	slices.SortStableFunc(stale, func(a, b string) int { return staleLevel(a) - staleLevel(b) })
	for len(stale) > 0 {
		n := min(len(stale), maxChains)
		w := &restoreWriter{}
		w.line("*nat")
		w.chain(stale[:n]...)
		for _, c := range stale[:n] {
			w.line("-X " + c)
		}
		w.line("COMMIT")
		add(w, 0)
		stale = stale[n:]
	}
	rs.Stats.NATRulesWritten = natRules
}

// staleLevel orders per-service chains so that referrers come first:
// KUBE-FW- jumps to KUBE-EXT-, which jumps to KUBE-SVC-/KUBE-SVL-, which
// jump to KUBE-SEP-.
func staleLevel(chain string) int {
	for i, p := range []string{prefixFirewall, prefixExternal, prefixClusterPolicy, prefixLocalPolicy, prefixEndpoint} {
		if strings.HasPrefix(chain, p) {
			return i
		}
	}
	return 0
}

func fixedFilterRules(cfg *Config, mark string) []string {
	var out []string
	if cfg.LocalhostNodePorts {
		// route_localnet lets the node accept 127.0.0.0/8 from the wire;
		// only what we DNATed may use it.
		out = append(out, line("-A", ChainKubeletFirewall, "-m comment --comment", quote("block incoming localnet connections"),
			"-d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP"))
	}
	if !cfg.ConntrackTCPLiberal {
		// An out-of-window packet would otherwise escape conntrack's DNAT
		// reversal and reset the client's connection.
		count := ""
		if cfg.InvalidCounter != "" {
			count = " -m nfacct --nfacct-name " + cfg.InvalidCounter
		}
		out = append(out, line("-A", ChainForward, "-m conntrack --ctstate INVALID"+count, "-j DROP"))
	}
	// Forward what we marked, whatever the FORWARD policy.
	return append(out,
		line("-A", ChainForward, "-m comment --comment", quote("kubernetes forwarding rules"),
			"-m mark --mark", mark+"/"+mark, "-j ACCEPT"),
		line("-A", ChainForward, "-m comment --comment", quote("kubernetes forwarding conntrack rule"),
			"-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"))
}

func fixedNATRules(cfg *Config, mark string) []string {
	// Fully random source ports, as kube-proxy always asks (Linux 3.13):
	// connections from many pods to one destination do not collide on
	// the masqueraded port (kubernetes#76699).
	masq := line("-A", ChainPostrouting, "-m comment --comment", quote("kubernetes service traffic requiring SNAT"), "-j MASQUERADE --random-fully")
	return []string{
		line("-A", ChainPostrouting, "-m mark ! --mark", mark+"/"+mark, "-j RETURN"),
		// Clear the mark so a packet that traverses the stack again is
		// not masqueraded twice.
		line("-A", ChainPostrouting, "-j MARK --xor-mark", mark),
		masq,
		line("-A", ChainMarkMasq, "-j MARK --or-mark", mark),
	}
}

// writeServiceJumps writes the rules of KUBE-SERVICES and KUBE-NODEPORTS
// that jump to the service ports' chains: all of them on a full sync,
// with the node-port jump after every other rule of KUBE-SERVICES (the
// others are more specific); else only what edit changes, new
// KUBE-SERVICES rules at the top so that the node-port jump stays last.
func writeServiceJumps(w *restoreWriter, ordered []*fragment, nodePorts []string, edit *editPlan) {
	if edit != nil {
		for _, d := range edit.diffs {
			w.edit(d.old.natServicesOrNil(), d.cur.natServicesOrNil(), "1")
			w.edit(d.old.natNodePortsOrNil(), d.cur.natNodePortsOrNil(), "")
		}
		return
	}
	for _, f := range ordered {
		w.lines(f.natServices)
	}
	w.lines(nodePorts)
	for _, f := range ordered {
		w.lines(f.natNodePorts)
	}
}

// nodePortsJumps are the last rules of KUBE-SERVICES, sending what is
// left to KUBE-NODEPORTS when it is addressed to the node.
func nodePortsJumps(cfg *Config) []string {
	comment := quote("kubernetes service nodeports; NOTE: this must be the last rule in this chain")
	if len(cfg.NodePortAddresses) > 0 {
		var out []string
		for _, a := range cfg.NodePortAddresses {
			out = append(out, line("-A", ChainServices, "-m comment --comment", comment, "-d", a.String(), "-j", ChainNodePorts))
		}
		return out
	}
	dst := "-m addrtype --dst-type LOCAL"
	if cfg.Family == v1.IPv6Protocol {
		dst += " ! -d ::1/128"
	} else if !cfg.LocalhostNodePorts {
		dst += " ! -d 127.0.0.0/8"
	}
	return []string{line("-A", ChainServices, "-m comment --comment", comment, dst, "-j", ChainNodePorts)}
}

// restoreWriter accumulates iptables-restore input.
type restoreWriter struct {
	b bytes.Buffer
	r int // rule lines (-A, -I, -D, -X) written
}

func (w *restoreWriter) line(l string) {
	w.b.WriteString(l)
	w.b.WriteByte('\n')
	if strings.HasPrefix(l, "-") {
		w.r++
	}
}

func (w *restoreWriter) lines(groups ...[]string) {
	for _, g := range groups {
		for _, l := range g {
			w.line(l)
		}
	}
}

func (w *restoreWriter) chain(names ...string) {
	for _, c := range names {
		w.line(":" + c + " - [0:0]")
	}
}

// edit writes what turns the rules old into cur in chains that are not
// flushed: a -D for each rule that goes, and an append (or an insert at
// position insertAt) for each that comes. Rules in both stay untouched.
func (w *restoreWriter) edit(old, cur []string, insertAt string) {
	for _, r := range old {
		if !slices.Contains(cur, r) {
			w.line("-D " + strings.TrimPrefix(r, "-A "))
		}
	}
	for _, r := range cur {
		if slices.Contains(old, r) {
			continue
		}
		if insertAt == "" {
			w.line(r)
			continue
		}
		chain, rest, _ := strings.Cut(strings.TrimPrefix(r, "-A "), " ")
		w.line("-I " + chain + " " + insertAt + " " + rest)
	}
}

// editPlan lists, in order, the changed ports whose top-level rules an
// editing sync rewrites; old or cur is nil for a port that came or went.
type editPlan struct {
	diffs []portDiff
}

type portDiff struct {
	old, cur *fragment
}

func (e *editPlan) touchesFilter() bool {
	for _, d := range e.diffs {
		if !slices.Equal(d.old.filterAll(), d.cur.filterAll()) {
			return true
		}
	}
	return false
}

func (f *fragment) filterAll() []string {
	if f == nil {
		return nil
	}
	return slices.Concat(f.filterServices, f.filterExternal, f.filterNodePort, f.filterFirewall)
}

func (f *fragment) natServicesOrNil() []string {
	if f == nil {
		return nil
	}
	return f.natServices
}

func (f *fragment) natNodePortsOrNil() []string {
	if f == nil {
		return nil
	}
	return f.natNodePorts
}
