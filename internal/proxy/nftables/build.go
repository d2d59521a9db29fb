package nftables

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	nft "github.com/svcnet/svcnet/internal/nftables"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// Config is what the rule set depends on besides the snapshot: facts
// about the node and kube-proxy's flags.
type Config struct {
	proxy.NodeConfig
	// ServiceCIDRs are the service ranges of Family: traffic to an address
	// in them that no Service has is dropped.
	ServiceCIDRs []netip.Prefix
}

func (c Config) withDefaults() Config {
	c.NodeConfig = c.NodeConfig.WithDefaults()
	return c
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	if err := c.NodeConfig.Validate("nftables"); err != nil {
		return err
	}
	is6 := c.withDefaults().Family == v1.IPv6Protocol
	for _, p := range c.ServiceCIDRs {
		if p.Addr().Is6() != is6 {
			return fmt.Errorf("nftables: service CIDR %s is not %s", p, c.Family)
		}
	}
	return nil
}

func (c *Config) family() nft.Family {
	if c.Family == v1.IPv6Protocol {
		return nft.IPv6
	}
	return nft.IPv4
}

func (c *Config) layout() Layout {
	return Layout{IPv6: c.Family == v1.IPv6Protocol, MasqueradeMark: 1 << c.MasqueradeBit,
		ServiceCIDRs: c.ServiceCIDRs, NodePortIPs: c.NodePortAddresses, ClusterCIDR: c.ClusterCIDR, MasqueradeAll: c.MasqueradeAll}
}

func sameConfig(a, b Config) bool {
	return a.Family == b.Family && a.Node == b.Node && slices.Equal(a.NodeIPs, b.NodeIPs) &&
		a.ClusterCIDR == b.ClusterCIDR && a.MasqueradeBit == b.MasqueradeBit && a.MasqueradeAll == b.MasqueradeAll &&
		slices.Equal(a.NodePortAddresses, b.NodePortAddresses) && slices.Equal(a.ServiceCIDRs, b.ServiceCIDRs)
}

// fragment is everything one service port puts in the table: its own
// chains and affinity sets, and its elements in the shared sets and maps.
type fragment struct {
	name     svcstate.ServicePortName
	chains   []*nft.Chain
	affinity []*nft.Set
	elems    []elemRef

	reachable       int
	noLocalInternal bool
	noLocalExternal bool
}

type elemRef struct {
	set string
	el  nft.Element
}

// elemID names an element of a shared set or map.
type elemID struct {
	set string
	key nft.Key
}

// claim is a port's wish for an element; when two ports want the same
// key (two Services given one external IP and port), the first in name
// order has it.
type claim struct {
	port svcstate.ServicePortName
	el   nft.Element
}

// State is what one sync leaves for building the next. It keeps no
// rules: a port's fragment is a pure function of the snapshot, so the
// next partial build renders a changed port's old fragment again from
// the snapshot this state was built from (which the tracker keeps
// anyway), instead of holding 400,000 rules for 10,000 services.
type State struct {
	cfg  Config
	snap *svcstate.Snapshot
	// claims is shared with, and updated by, the State built from this
	// one: a State is consumed by the Build it is given to.
	claims map[elemID][]claim
	totals totals
}

// totals are the sums over every port's fragment.
type totals struct {
	ports, endpoints, chains, noLocalInternal, noLocalExternal int
}

func (t *totals) add(f *fragment, sign int) {
	if f == nil {
		return
	}
	t.ports += sign
	t.endpoints += sign * f.reachable
	t.chains += sign * len(f.chains)
	if f.noLocalInternal {
		t.noLocalInternal += sign
	}
	if f.noLocalExternal {
		t.noLocalExternal += sign
	}
}

// Input is what a rule set is built from.
type Input struct {
	Snapshot *svcstate.Snapshot
	// Changed lists the service ports that changed since Previous.
	Changed map[svcstate.ServicePortName]struct{}
	// Previous is the state last applied successfully, nil for none; Build
	// consumes it (its element claims move to the new state), so a failed
	// sync must be followed by a full one.
	Previous *State
	// Full rewrites every chain, set and map.
	Full bool
	// ExistingChains and ExistingSets are what the kernel's table held
	// before a full sync: per-service chains and affinity sets among them
	// that are no longer wanted go away. Ignored by partial syncs, which
	// know what they remove.
	ExistingChains, ExistingSets []string
	// Fresh says the kernel has no table yet (or the transaction deletes
	// it first): a full plan then creates, without emptying what it
	// creates — 110,000 fewer messages for 10,000 services.
	Fresh bool
}

// Stats describe a plan.
type Stats struct {
	ServicePorts    int
	Endpoints       int // reachable through the rules
	Chains          int // per-service chains in the table
	ChainsWritten   int
	StaleChains     int
	Elements        int // in the shared sets and maps
	ElementsWritten int // added or deleted
	NoLocalInternal int
	NoLocalExternal int
}

// Plan is the outcome of Build: what to change in the kernel, and the
// state to build the next plan from once it is applied.
type Plan struct {
	Full  bool
	Fresh bool // full, into no table
	// Table is the whole desired table (full plans only).
	Table *nft.Table

	// Partial plans: chains to create, to rewrite, to empty (deleted by a
	// later sync, when the kernel surely knows nothing refers to them);
	// affinity sets to create and delete; elements to delete and add.
	NewChains     []*nft.Chain
	ChangedChains []*nft.Chain
	StaleChains   []string
	NewSets       []*nft.Set
	StaleSets     []string
	DelElems      map[string][]nft.Element
	AddElems      map[string][]nft.Element

	Stats Stats
	State *State
	// Reachable is the number of endpoints each changed port now reaches
	// (absent: the port is gone), for the sync's log line.
	Reachable map[svcstate.ServicePortName]int
}

// Build computes what to write for in.Snapshot. It is a pure function of
// its input (in.Previous is consumed): a full plan holds the whole table,
// a partial one only what differs for the ports in in.Changed, the
// others' chains and elements being reused untouched.
func Build(cfg Config, in Input) *Plan {
	cfg = cfg.withDefaults()
	prev := in.Previous
	full := in.Full || prev == nil || !sameConfig(prev.cfg, cfg)
	st := &State{cfg: cfg, snap: in.Snapshot}
	renderPort := func(snap *svcstate.Snapshot, n svcstate.ServicePortName) *fragment {
		sp, eps := snap.Port(n)
		if sp == nil {
			return nil
		}
		return render(&cfg, sp.ForFamily(cfg.Family), familyEndpoints(eps, cfg.Family))
	}
	if full {
		st.claims = map[elemID][]claim{}
		fragments := map[svcstate.ServicePortName]*fragment{}
		for svc := range in.Snapshot.All {
			for _, p := range svc.Ports {
				if f := renderPort(in.Snapshot, p.Name); f != nil {
					fragments[p.Name] = f
					st.totals.add(f, 1)
					for _, e := range f.elems {
						st.claim(p.Name, e)
					}
				}
			}
		}
		return buildFull(&cfg, st, fragments, in)
	}

	plan := &Plan{State: st, DelElems: map[string][]nft.Element{}, AddElems: map[string][]nft.Element{},
		Reachable: map[svcstate.ServicePortName]int{}}
	// prev is consumed: its claims become the new state's.
	st.claims, st.totals = prev.claims, prev.totals
	names := make([]svcstate.ServicePortName, 0, len(in.Changed))
	for n := range in.Changed {
		names = append(names, n)
	}
	slices.SortFunc(names, svcstate.ServicePortName.Compare)
	touched := map[elemID]*nft.Element{} // effective element before the changes
	for _, n := range names {
		old, cur := renderPort(prev.snap, n), renderPort(in.Snapshot, n)
		st.totals.add(old, -1)
		st.totals.add(cur, 1)
		if cur != nil {
			plan.Reachable[n] = cur.reachable
		}
		diffChains(plan, old, cur)
		for _, e := range old.elemsOrNil() {
			id := elemID{e.set, e.el.Key}
			if _, seen := touched[id]; !seen {
				touched[id] = st.effective(id)
			}
			st.unclaim(n, id)
		}
		for _, e := range cur.elemsOrNil() {
			id := elemID{e.set, e.el.Key}
			if _, seen := touched[id]; !seen {
				touched[id] = st.effective(id)
			}
			st.claim(n, e)
		}
	}
	ids := make([]elemID, 0, len(touched))
	for id := range touched {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b elemID) int {
		if c := strings.Compare(a.set, b.set); c != 0 {
			return c
		}
		return a.key.Compare(b.key)
	})
	for _, id := range ids {
		before, after := touched[id], st.effective(id)
		switch {
		case before == nil && after == nil:
		case before != nil && after != nil && *before == *after:
		default:
			if before != nil {
				plan.DelElems[id.set] = append(plan.DelElems[id.set], *before)
			}
			if after != nil {
				plan.AddElems[id.set] = append(plan.AddElems[id.set], *after)
			}
		}
	}
	plan.stats(st)
	for _, e := range plan.DelElems {
		plan.Stats.ElementsWritten += len(e)
	}
	for _, e := range plan.AddElems {
		plan.Stats.ElementsWritten += len(e)
	}
	plan.Stats.ChainsWritten = len(plan.NewChains) + len(plan.ChangedChains)
	plan.Stats.StaleChains = len(plan.StaleChains)
	return plan
}

func (f *fragment) elemsOrNil() []elemRef {
	if f == nil {
		return nil
	}
	return f.elems
}

func (s *State) claim(port svcstate.ServicePortName, e elemRef) {
	id := elemID{e.set, e.el.Key}
	cs := s.claims[id]
	i, _ := slices.BinarySearchFunc(cs, port, func(c claim, p svcstate.ServicePortName) int { return c.port.Compare(p) })
	s.claims[id] = slices.Insert(cs, i, claim{port, e.el})
}

func (s *State) unclaim(port svcstate.ServicePortName, id elemID) {
	cs := s.claims[id]
	i, found := slices.BinarySearchFunc(cs, port, func(c claim, p svcstate.ServicePortName) int { return c.port.Compare(p) })
	if !found {
		return
	}
	if cs = slices.Delete(cs, i, i+1); len(cs) == 0 {
		delete(s.claims, id)
	} else {
		s.claims[id] = cs
	}
}

func (s *State) effective(id elemID) *nft.Element {
	cs := s.claims[id]
	if len(cs) == 0 {
		return nil
	}
	e := cs[0].el
	return &e
}

// diffChains adds to plan what turns old's chains and sets into cur's.
func diffChains(plan *Plan, old, cur *fragment) {
	before := map[string][]nft.Rule{}
	oldSets := map[string]*nft.Set{}
	if old != nil {
		for _, c := range old.chains {
			before[c.Name] = c.Rules
		}
		for _, s := range old.affinity {
			oldSets[s.Name] = s
		}
	}
	now := map[string]bool{}
	// A set whose timeout changed is made anew, which needs every rule
	// that refers to it gone first: all the port's chains are rewritten.
	replaced := false
	if cur != nil {
		for _, s := range cur.affinity {
			if o := oldSets[s.Name]; o != nil && o.Timeout != s.Timeout {
				replaced = true
			}
		}
		for _, c := range cur.chains {
			now[c.Name] = true
			rules, existed := before[c.Name]
			switch {
			case !existed:
				plan.NewChains = append(plan.NewChains, c)
			case replaced || !nft.RulesEqual(rules, c.Rules):
				plan.ChangedChains = append(plan.ChangedChains, c)
			}
		}
	}
	if old != nil {
		for _, c := range old.chains {
			if !now[c.Name] {
				plan.StaleChains = append(plan.StaleChains, c.Name)
			}
		}
	}
	newSets := map[string]bool{}
	if cur != nil {
		for _, s := range cur.affinity {
			newSets[s.Name] = true
			if o := oldSets[s.Name]; o == nil || o.Timeout != s.Timeout {
				if o != nil {
					plan.StaleSets = append(plan.StaleSets, s.Name)
				}
				plan.NewSets = append(plan.NewSets, s)
			}
		}
	}
	for name := range oldSets {
		if !newSets[name] {
			plan.StaleSets = append(plan.StaleSets, name)
		}
	}
	slices.Sort(plan.StaleSets)
}

func (p *Plan) stats(st *State) {
	t := st.totals
	p.Stats.ServicePorts, p.Stats.Endpoints, p.Stats.Chains = t.ports, t.endpoints, t.chains
	p.Stats.NoLocalInternal, p.Stats.NoLocalExternal = t.noLocalInternal, t.noLocalExternal
	p.Stats.Elements = len(st.claims)
}

// buildFull lays out the whole table.
func buildFull(cfg *Config, st *State, fragments map[svcstate.ServicePortName]*fragment, in Input) *Plan {
	t := cfg.layout().Fixed()
	names := make([]svcstate.ServicePortName, 0, len(fragments))
	for n := range fragments {
		names = append(names, n)
	}
	slices.SortFunc(names, svcstate.ServicePortName.Compare)
	wanted := map[string]bool{}
	plan := &Plan{Full: true, Fresh: in.Fresh, Table: t, State: st, Reachable: map[svcstate.ServicePortName]int{}}
	for _, n := range names {
		f := fragments[n]
		if _, changed := in.Changed[n]; changed {
			plan.Reachable[n] = f.reachable
		}
		t.Chains = append(t.Chains, f.chains...)
		t.Sets = append(t.Sets, f.affinity...)
		for _, c := range f.chains {
			wanted[c.Name] = true
		}
		for _, s := range f.affinity {
			wanted[s.Name] = true
		}
	}
	ids := make([]elemID, 0, len(st.claims))
	for id := range st.claims {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b elemID) int { return a.key.Compare(b.key) })
	for _, id := range ids {
		t.Elements[id.set] = append(t.Elements[id.set], *st.effective(id))
	}
	for _, c := range in.ExistingChains {
		if !wanted[c] && !IsFixedChain(c) {
			plan.StaleChains = append(plan.StaleChains, c)
		}
	}
	for _, s := range in.ExistingSets {
		if !wanted[s] && strings.HasPrefix(s, PrefixAffinity) {
			plan.StaleSets = append(plan.StaleSets, s)
		}
	}
	slices.Sort(plan.StaleChains)
	slices.Sort(plan.StaleSets)
	plan.stats(st)
	plan.Stats.ChainsWritten = plan.Stats.Chains
	plan.Stats.ElementsWritten = plan.Stats.Elements
	plan.Stats.StaleChains = len(plan.StaleChains)
	return plan
}

// Tx encodes the plan as one transaction. A full plan creates what is
// missing, empties every fixed set and map and every chain it keeps, and
// fills them again: packets see the old table or the new one, never a
// mix, and affinity sets keep their clients. Stale chains are emptied;
// Proxier deletes them in a later transaction, as kube-proxy does
// (before Linux 6.2 the kernel notices a chain is unreferenced only some
// time after the map element that referred to it is gone).
func (p *Plan) Tx(f nft.Family) *nft.Tx {
	tx := nft.NewTx(f, TableName)
	p.AddTo(tx)
	return tx
}

// freshRulesPerTx bounds the service chains' rules in each of the
// transactions FreshTxs writes: the kernel binds each rule's anonymous
// map by walking the whole transaction so far (__nft_set_trans_bind), so
// one transaction of n such rules costs n², 50% of a 10,000-Service full
// sync (docs/benchmarks.md).
const freshRulesPerTx = 500

// FreshTxs encodes a full plan into no table as several transactions,
// to be run in order: the first creates the table, the affinity sets and
// every service chain, empty; the next ones fill the service chains,
// freshRulesPerTx rules at a time; the last adds the fixed sets, maps
// and chains, the elements and the base chains. Until that last one
// nothing hooks the table, so packets see no table or the whole one,
// as with a single transaction. Other plans are one transaction.
func (p *Plan) FreshTxs(f nft.Family) []*nft.Tx {
	if !p.Full || !p.Fresh {
		return []*nft.Tx{p.Tx(f)}
	}
	rest := *p.Table
	rest.Chains, rest.Sets = nil, nil
	var service []*nft.Chain
	for _, c := range p.Table.Chains {
		if IsFixedChain(c.Name) {
			rest.Chains = append(rest.Chains, c)
		} else {
			service = append(service, c)
		}
	}
	first := nft.NewTx(f, TableName)
	first.AddTable(p.Table.Comment)
	for _, s := range p.Table.Sets {
		if strings.HasPrefix(s.Name, PrefixAffinity) {
			first.AddSet(s)
		} else {
			rest.Sets = append(rest.Sets, s)
		}
	}
	for _, c := range service {
		first.AddChain(&nft.Chain{Name: c.Name, Comment: c.Comment})
	}
	txs := []*nft.Tx{first}
	cur, n := first, 0
	for _, c := range service {
		for _, r := range c.Rules {
			if n == freshRulesPerTx {
				cur, n = nft.NewTx(f, TableName), 0
				txs = append(txs, cur)
			}
			cur.AddRule(c.Name, r)
			n++
		}
	}
	last := nft.NewTx(f, TableName)
	last.Fill(&rest, nft.FillOptions{})
	return append(txs, last)
}

// AddTo adds the plan's operations to tx.
func (p *Plan) AddTo(tx *nft.Tx) {
	if p.Full {
		tx.Fill(p.Table, nft.FillOptions{Replace: !p.Fresh, EmptyChains: p.StaleChains, DeleteSets: p.StaleSets,
			// Affinity sets keep the clients they have seen.
			Keep: func(set string) bool { return strings.HasPrefix(set, PrefixAffinity) }})
		return
	}
	for _, c := range p.NewChains {
		tx.AddChain(c)
	}
	for _, c := range p.ChangedChains {
		tx.FlushChain(c.Name)
	}
	for _, c := range p.StaleChains {
		tx.FlushChain(c)
	}
	for _, s := range p.StaleSets {
		tx.DeleteSet(s)
	}
	for _, s := range p.NewSets {
		tx.AddSet(s)
	}
	for _, c := range slices.Concat(p.NewChains, p.ChangedChains) {
		for _, r := range c.Rules {
			tx.AddRule(c.Name, r)
		}
	}
	for _, set := range sortedKeys(p.DelElems) {
		tx.DeleteElements(sharedSets[set], p.DelElems[set])
	}
	for _, set := range sortedKeys(p.AddElems) {
		tx.AddElements(sharedSets[set], p.AddElems[set])
	}
}

// sharedSets are the fixed sets and maps that service ports put elements
// in, as the layout declares them.
var sharedSets = func() map[string]*nft.Set {
	m := map[string]*nft.Set{}
	// NodePortIPs, so that nodeport-ips is declared too.
	for _, s := range (Layout{NodePortIPs: []netip.Addr{netip.IPv4Unspecified()}}).Fixed().Sets {
		m[s.Name] = s
	}
	return m
}()

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Format prints a plan for people and golden files: a full plan as the
// table, a partial one as its operations.
func (p *Plan) Format(f nft.Family) string {
	if p.Full {
		s := p.Table.Format()
		for _, c := range p.StaleChains {
			s += "flush chain " + c + "\n"
		}
		for _, c := range p.StaleSets {
			s += "delete set " + c + "\n"
		}
		return s
	}
	var b strings.Builder
	for _, c := range p.NewChains {
		fmt.Fprintf(&b, "add chain %s\n", c.Name)
	}
	for _, c := range p.ChangedChains {
		fmt.Fprintf(&b, "flush chain %s\n", c.Name)
	}
	for _, c := range p.StaleChains {
		fmt.Fprintf(&b, "flush chain %s (stale)\n", c)
	}
	for _, s := range p.StaleSets {
		fmt.Fprintf(&b, "delete set %s\n", s)
	}
	for _, s := range p.NewSets {
		fmt.Fprintf(&b, "add set %s { timeout %ds }\n", s.Name, int64(s.Timeout/time.Second))
	}
	for _, c := range slices.Concat(p.NewChains, p.ChangedChains) {
		for _, r := range c.Rules {
			fmt.Fprintf(&b, "add rule %s %s\n", c.Name, r.Format(f))
		}
	}
	for _, set := range sortedKeys(p.DelElems) {
		for _, e := range p.DelElems[set] {
			fmt.Fprintf(&b, "delete element %s { %s }\n", set, sharedSets[set].FormatElement(e))
		}
	}
	for _, set := range sortedKeys(p.AddElems) {
		for _, e := range p.AddElems[set] {
			fmt.Fprintf(&b, "add element %s { %s }\n", set, sharedSets[set].FormatElement(e))
		}
	}
	return b.String()
}

func familyEndpoints(eps []svcstate.Endpoint, f v1.IPFamily) []svcstate.Endpoint {
	is6 := f == v1.IPv6Protocol
	for i := range eps {
		if eps[i].IP.Is6() != is6 {
			out := slices.Clone(eps[:i])
			for _, e := range eps[i+1:] {
				if e.IP.Is6() == is6 {
					out = append(out, e)
				}
			}
			return out
		}
	}
	return eps
}
