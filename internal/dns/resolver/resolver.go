// Package resolver answers DNS questions from an index.Index. It is pure:
// the same index and question always give the same answer, with no
// network, clock or cache, so every case is a table-driven test.
//
// Names outside the cluster are not answered here: the Result says to
// forward them, or (for ExternalName targets and autopath) which outside
// names would complete the answer, and the server asks its upstreams.
package resolver

import (
	"net/netip"
	"slices"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/dns/index"
)

// maxChain bounds CNAME chains inside the zone (ExternalName services may
// point at each other), like the 8-hop limit most resolvers use.
const maxChain = 8

// Question is one DNS question and who asked it.
type Question struct {
	Name  string // as asked, any case, fully qualified
	Type  uint16
	Class uint16
	// Client is the address the query came from; autopath uses it to find
	// the asking pod's namespace. The zero value disables autopath.
	Client netip.Addr
}

// Config is the resolver's fixed configuration.
type Config struct {
	// Autopath turns on server-side search-path completion (see autopath).
	Autopath bool
	// HostSearch is the search list kubelet appends after the cluster's
	// three domains: the node's resolv.conf search line, in order.
	HostSearch []string
	// ForwardAll makes a caching forwarder of the server (the node-local
	// cache): every well-formed question goes upstream, no zone is read.
	ForwardAll bool
}

// Result is the resolver's answer.
type Result struct {
	// Msg is the response. It is nil only when Forward is set.
	Msg *dns.Msg
	// Forward says the name is not the cluster's: ask an upstream.
	Forward bool
	// Chase, when set, names outside names whose upstream answers complete
	// Msg; see Chase.Complete. Msg alone is still a correct answer.
	Chase *Chase
	// Autopath says the answer came from a search-path expansion.
	Autopath bool
}

// Resolver answers questions with a fixed Config. It holds no state.
type Resolver struct {
	autopathOn bool
	hostSearch []string
	forwardAll bool
}

// New returns a resolver for cfg.
func New(cfg Config) *Resolver {
	r := &Resolver{autopathOn: cfg.Autopath, forwardAll: cfg.ForwardAll}
	for _, d := range cfg.HostSearch {
		if d = index.Canonical(d); d != "." {
			if _, ok := dns.IsDomainName(d); ok {
				r.hostSearch = append(r.hostSearch, d)
			}
		}
	}
	return r
}

// Answer checks a request as it came off the wire and answers it: FORMERR
// for anything but exactly one question and no answer or authority
// records, NOTIMP for opcodes other than QUERY. EDNS is the server's
// business (it depends on the transport), so the OPT record is ignored.
func (r *Resolver) Answer(idx *index.Index, req *dns.Msg, client netip.Addr) Result {
	if req.Opcode != dns.OpcodeQuery {
		return Result{Msg: ErrorReply(req, dns.RcodeNotImplemented)}
	}
	if req.Response || len(req.Question) != 1 || len(req.Answer) != 0 || len(req.Ns) != 0 {
		return Result{Msg: ErrorReply(req, dns.RcodeFormatError)}
	}
	q := req.Question[0]
	res := r.Resolve(idx, Question{Name: q.Name, Type: q.Qtype, Class: q.Qclass, Client: client})
	if res.Msg != nil {
		res.Msg.Id = req.Id
		res.Msg.RecursionDesired = req.RecursionDesired
		res.Msg.CheckingDisabled = req.CheckingDisabled
	}
	return res
}

// ErrorReply echoes the request's header and question, which is what
// clients match replies on, with rcode.
func ErrorReply(req *dns.Msg, rcode int) *dns.Msg {
	m := new(dns.Msg)
	m.Id = req.Id
	m.Response = true
	m.Opcode = req.Opcode
	m.RecursionDesired = req.RecursionDesired
	m.CheckingDisabled = req.CheckingDisabled
	m.RecursionAvailable = true
	if len(req.Question) == 1 {
		m.Question = slices.Clone(req.Question)
	}
	m.Rcode = rcode
	return m
}

// Resolve answers one question.
//
//   - Malformed names and meta types (OPT, type 0) get FORMERR; AXFR and
//     IXFR get REFUSED (the zone is derived, not transferred); MAILA and
//     MAILB get NOTIMP.
//   - Classes other than IN and ANY get REFUSED: the cluster has no data
//     in them and upstreams are not asked for Chaos or Hesiod either.
//   - A not yet synced index gives SERVFAIL for the names it is
//     authoritative for, so no client caches a premature NXDOMAIN; a nil
//     index (no zone known at all) gives SERVFAIL for every name.
//   - Names in the zone get authoritative answers: records, NODATA with
//     the SOA, or NXDOMAIN with the SOA (and autopath on NXDOMAIN).
//   - Other names are for the upstreams (Result.Forward), and with
//     Config.ForwardAll every name is.
func (r *Resolver) Resolve(idx *index.Index, q Question) Result {
	m := reply(q)
	if _, ok := dns.IsDomainName(q.Name); !ok || !dns.IsFqdn(q.Name) {
		return rcode(m, dns.RcodeFormatError)
	}
	switch q.Type {
	case dns.TypeNone, dns.TypeOPT:
		return rcode(m, dns.RcodeFormatError)
	case dns.TypeAXFR, dns.TypeIXFR:
		return rcode(m, dns.RcodeRefused)
	case dns.TypeMAILA, dns.TypeMAILB:
		return rcode(m, dns.RcodeNotImplemented)
	}
	if q.Class != dns.ClassINET && q.Class != dns.ClassANY {
		return rcode(m, dns.RcodeRefused)
	}
	if r.forwardAll {
		return Result{Forward: true}
	}
	if idx == nil {
		return rcode(m, dns.RcodeServerFailure)
	}
	name := index.Canonical(q.Name)
	auth := idx.Authority(name)
	if auth == index.NotAuthoritative {
		return Result{Forward: true}
	}
	if !idx.Synced() {
		return rcode(m, dns.RcodeServerFailure)
	}

	a := lookup(idx, auth, q.Name, name, q.Type)
	if a.rcode == dns.RcodeNameError && auth == index.Zone {
		if res, ok := r.autopath(idx, q, name, m); ok {
			return res
		}
	}
	m.Authoritative = a.rcode != dns.RcodeServerFailure
	a.fill(m)
	res := Result{Msg: m}
	if a.chase != "" {
		res.Chase = &Chase{Names: []string{a.chase}}
	}
	return res
}

func reply(q Question) *dns.Msg {
	m := new(dns.Msg)
	m.Response = true
	m.Opcode = dns.OpcodeQuery
	m.RecursionAvailable = true
	m.Question = []dns.Question{{Name: q.Name, Qtype: q.Type, Qclass: q.Class}}
	return m
}

func rcode(m *dns.Msg, rc int) Result {
	m.Rcode = rc
	return Result{Msg: m}
}

// answer is the zone's part of a response.
type answer struct {
	rcode int
	ans   []dns.RR
	ns    []dns.RR
	extra []dns.RR
	// chase is the outside name the last CNAME points at, if any.
	chase string
}

func (a *answer) fill(m *dns.Msg) {
	m.Rcode = a.rcode
	m.Answer = a.ans
	m.Ns = a.ns
	m.Extra = a.extra
}

// positive reports whether a client's resolver would take the answer and
// stop searching: NOERROR with data of the asked type, not just a CNAME.
func (a *answer) positive(qtype uint16) bool {
	if a.rcode != dns.RcodeSuccess || a.chase != "" {
		return false
	}
	for _, rr := range a.ans {
		if t := rr.Header().Rrtype; t == qtype || qtype == dns.TypeANY {
			return true
		}
	}
	return false
}

// lookup answers qtype at name (canonical; qname is the spelling asked,
// used as the owner so the answer matches the question byte for byte),
// following CNAMEs inside the zone.
func lookup(idx *index.Index, auth index.Authority, qname, name string, qtype uint16) answer {
	var a answer
	owner := qname
	var seenBuf [maxChain]string // no map: this runs on every query
	seen := seenBuf[:0]
	for {
		seen = append(seen, name)
		node, ok := idx.Lookup(name)
		if !ok {
			a.rcode = dns.RcodeNameError
			a.ns = []dns.RR{idx.SOA(auth, name)}
			return a
		}
		cname := node.RRs(dns.TypeCNAME)
		if len(cname) == 0 || qtype == dns.TypeCNAME || qtype == dns.TypeANY {
			rrs := node.RRs(qtype)
			if qtype == dns.TypeANY {
				rrs = node.All()
			}
			if len(rrs) == 0 {
				a.ns = []dns.RR{idx.SOA(auth, name)}
				return a
			}
			a.ans = append(a.ans, withOwner(rrs, owner)...)
			a.extra = additional(idx, rrs)
			return a
		}
		a.ans = append(a.ans, withOwner(cname, owner)...)
		target := cname[0].(*dns.CNAME).Target
		if slices.Contains(seen, target) || len(seen) >= maxChain {
			// A loop between ExternalName services: no answer exists, and
			// saying so beats a chain the client would chase forever.
			return answer{rcode: dns.RcodeServerFailure}
		}
		auth = idx.Authority(target)
		if auth == index.NotAuthoritative {
			a.chase = target
			return a
		}
		owner, name = target, target
	}
}

// withOwner copies rrs, renaming them to owner when the question spelled
// the name differently (case). The index's records are shared and never
// changed.
func withOwner(rrs []dns.RR, owner string) []dns.RR {
	out := make([]dns.RR, len(rrs))
	for i, rr := range rrs {
		if rr.Header().Name != owner {
			rr = dns.Copy(rr)
			rr.Header().Name = owner
		}
		out[i] = rr
	}
	return out
}

// additional adds the addresses of SRV and NS targets in the zone, which
// saves the client a round trip per target. The server drops them first
// when the response is too large.
func additional(idx *index.Index, rrs []dns.RR) []dns.RR {
	var extra []dns.RR
	var seen map[string]bool
	for _, rr := range rrs {
		var target string
		switch v := rr.(type) {
		case *dns.SRV:
			target = v.Target
		case *dns.NS:
			target = v.Ns
		default:
			continue
		}
		if seen[target] {
			continue
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[target] = true
		if n, ok := idx.Lookup(target); ok {
			extra = append(extra, n.RRs(dns.TypeA)...)
			extra = append(extra, n.RRs(dns.TypeAAAA)...)
		}
	}
	return extra
}
