// Package index is the cluster DNS zone as an immutable value: every name
// the Kubernetes DNS-based service discovery specification (schema 1.1.0)
// defines, built from Services, EndpointSlices and Pods in one pass.
//
// An Index never changes after Build returns, so the server swaps whole
// indexes atomically and a question is always answered from one
// consistent snapshot. It knows which names exist, which is what tells
// NXDOMAIN from NODATA.
package index

import (
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/cow"
)

// SchemaVersion is what dns-version.<zone> answers.
const SchemaVersion = "1.1.0"

// Authority says whether the index answers for a name, and with which SOA.
type Authority int

const (
	// NotAuthoritative names belong upstream.
	NotAuthoritative Authority = iota
	// Zone names are at or below the cluster zone.
	Zone
	// Reverse names are PTR names of cluster addresses: ones the index
	// holds, or inside Options.ReverseCIDRs.
	Reverse
)

// Node is the set of records at one existing name. An empty Node is an
// empty non-terminal or a name without data: it exists, so questions for
// it get NODATA rather than NXDOMAIN.
type Node struct {
	rrsets []rrset
}

type rrset struct {
	typ uint16
	rrs []dns.RR
}

// RRs returns the records of type t. The slice and its records are shared
// by every reader of the index: callers must copy before changing either.
func (n *Node) RRs(t uint16) []dns.RR {
	for i := range n.rrsets {
		if n.rrsets[i].typ == t {
			return n.rrsets[i].rrs
		}
	}
	return nil
}

// All returns every record at the name, for ANY questions.
func (n *Node) All() []dns.RR {
	var all []dns.RR
	for _, s := range n.rrsets {
		all = append(all, s.rrs...)
	}
	return all
}

// Index is one snapshot of the cluster zone. A nil *Index is valid and
// answers nothing; see Synced.
type Index struct {
	zone     string // canonical: lower case, trailing dot
	podZone  string // "pod.<zone>"
	ttl      uint32
	pods     PodsMode
	synced   bool
	reverse  []netip.Prefix
	soa      *dns.SOA
	soaV4    *dns.SOA
	soaV6    *dns.SOA
	nodes    cow.Map[string, *Node]
	podIPs   cow.Map[nsAddr, struct{}]   // pod IPs by namespace (verified mode)
	podNS    cow.Map[string, struct{}]   // namespaces with pods (verified mode)
	clientNS cow.Map[netip.Addr, string] // pod IP -> namespace, for autopath
	services int
	// origin is the Updater the snapshot came from (its settings), gen
	// the snapshot itself; both unique in the process.
	origin, gen uint64
	// deps, when set, records what is read (see Record).
	deps *Deps
}

// Deps are what an answer was read from: the node at each name looked up
// (nil where the name did not exist) in one snapshot of one Updater. The
// answer is still right in a later snapshot of the same Updater where
// every one of those names has the same node, because the Updater gives a
// name a new node whenever anything at it changes. Names answered on the
// fly (pod records) and the pods behind autopath cannot be checked that
// way: an answer that read them holds for its own snapshot only.
type Deps struct {
	origin, gen uint64
	names       []string
	nodes       []*Node
	once        bool
}

// Record returns a copy of ix that notes in deps everything read from it.
func (ix *Index) Record() (rec *Index, deps *Deps) {
	deps = &Deps{origin: ix.origin, gen: ix.gen}
	c := *ix
	c.deps = deps
	return &c, deps
}

// Gen identifies the snapshot; no two snapshots share one.
func (ix *Index) Gen() uint64 { return ix.gen }

// Holds reports whether what d recorded reads the same in cur.
func (d *Deps) Holds(cur *Index) bool {
	if cur.gen == d.gen {
		return true
	}
	if d.once || cur.origin != d.origin {
		return false
	}
	for i, name := range d.names {
		if n, _ := cur.nodes.Get(name); n != d.nodes[i] {
			return false
		}
	}
	return true
}

func (ix *Index) node(name string) (*Node, bool) {
	n, ok := ix.nodes.Get(name)
	if ix.deps != nil {
		ix.deps.names = append(ix.deps.names, name)
		ix.deps.nodes = append(ix.deps.nodes, n)
	}
	return n, ok
}

// Zone is the cluster domain, canonical ("cluster.local.").
func (ix *Index) Zone() string { return ix.zone }

// TTL of the records in the index.
func (ix *Index) TTL() uint32 { return ix.ttl }

// Synced reports whether the index was built from synced informers. A nil
// index is not synced.
func (ix *Index) Synced() bool { return ix != nil && ix.synced }

// Services is how many Services went into the index, for logs.
func (ix *Index) Services() int { return ix.services }

// SOA is the record for the authority section of answers about name: the
// zone's, or the reverse zone's for PTR names.
func (ix *Index) SOA(a Authority, name string) *dns.SOA {
	// The serial is the apex's: an answer carrying it depends on the apex.
	ix.node(ix.zone)
	if a == Reverse {
		if strings.HasSuffix(name, "ip6.arpa.") {
			return ix.soaV6
		}
		return ix.soaV4
	}
	return ix.soa
}

// Authority reports whether the index answers name (canonical). Partial
// reverse names such as 10.in-addr.arpa stay upstream: the cluster owns
// addresses, not the delegations above them.
func (ix *Index) Authority(name string) Authority {
	if name == ix.zone || strings.HasSuffix(name, "."+ix.zone) {
		return Zone
	}
	if !strings.HasSuffix(name, ".arpa.") {
		return NotAuthoritative
	}
	if _, ok := ix.node(name); ok {
		return Reverse
	}
	ip, ok := ParseReverseName(name)
	if !ok {
		return NotAuthoritative
	}
	for _, p := range ix.reverse {
		if p.Contains(ip) {
			return Reverse
		}
	}
	return NotAuthoritative
}

// Lookup returns the node at name (canonical) and whether the name exists.
func (ix *Index) Lookup(name string) (*Node, bool) {
	if n, ok := ix.node(name); ok {
		return n, true
	}
	if ix.pods != PodsDisabled && strings.HasSuffix(name, "."+ix.podZone) {
		if ix.deps != nil {
			ix.deps.once = true
		}
		return ix.lookupPod(name)
	}
	return nil, false
}

// lookupPod answers `<dashed-ip>.<ns>.pod.<zone>` and `<ns>.pod.<zone>`
// on the fly: in insecure mode the set of names is unbounded, and in
// verified mode a query may spell an IPv6 address in several ways.
func (ix *Index) lookupPod(name string) (*Node, bool) {
	rest := name[:len(name)-len(ix.podZone)-1] // "<label>.<ns>" or "<ns>"
	label, ns := firstLabel(rest)
	if ns == "" {
		// <ns>.pod.<zone>: any namespace in insecure mode, only ones with
		// pods in verified mode.
		if strings.Contains(label, "\\") {
			return nil, false
		}
		if ix.pods == PodsInsecure {
			return &Node{}, true
		}
		if _, ok := ix.podNS.Get(label); !ok {
			return nil, false
		}
		return &Node{}, true
	}
	if strings.ContainsAny(ns, ".\\") {
		return nil, false
	}
	ip, ok := ParseDashedIP(label)
	if !ok {
		return nil, false
	}
	if ix.pods == PodsVerified {
		if _, ok := ix.podIPs.Get(nsAddr{ns, ip}); !ok {
			return nil, false
		}
	}
	return &Node{rrsets: []rrset{addrRRset(name, ix.ttl, ip)}}, true
}

// PodNamespace returns the namespace of the pod using ip, when exactly one
// pod does and it uses the cluster's DNS settings. Autopath needs it to
// know the client's search path.
func (ix *Index) PodNamespace(ip netip.Addr) (string, bool) {
	if ix == nil {
		return "", false
	}
	if ix.deps != nil {
		ix.deps.once = true
	}
	ns, ok := ix.clientNS.Get(ip.Unmap())
	return ns, ok
}

func addrRRset(owner string, ttl uint32, ip netip.Addr) rrset {
	ip = ip.Unmap()
	if ip.Is4() {
		return rrset{typ: dns.TypeA, rrs: []dns.RR{newA(owner, ttl, ip)}}
	}
	return rrset{typ: dns.TypeAAAA, rrs: []dns.RR{newAAAA(owner, ttl, ip)}}
}

func hdr(owner string, t uint16, ttl uint32) dns.RR_Header {
	return dns.RR_Header{Name: owner, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
}

func newA(owner string, ttl uint32, ip netip.Addr) *dns.A {
	a := ip.As4()
	return &dns.A{Hdr: hdr(owner, dns.TypeA, ttl), A: a[:]}
}

func newAAAA(owner string, ttl uint32, ip netip.Addr) *dns.AAAA {
	a := ip.As16()
	return &dns.AAAA{Hdr: hdr(owner, dns.TypeAAAA, ttl), AAAA: a[:]}
}

func newAddr(owner string, ttl uint32, ip netip.Addr) dns.RR {
	if ip.Is4() {
		return newA(owner, ttl, ip)
	}
	return newAAAA(owner, ttl, ip)
}
