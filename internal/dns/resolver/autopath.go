package resolver

import (
	"strings"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/dns/index"
)

// autopath completes a pod's search path on the server, so that looking up
// an outside name such as api.github.com costs the pod one round trip
// instead of four NXDOMAINs first (ndots:5 with three cluster search
// domains). The model is CoreDNS's autopath plugin; the conditions below
// are stricter so that the answer is always the one the pod's own resolver
// would have reached.
//
// It applies only when all of these hold:
//
//   - Config.Autopath is on, the class is IN, and the question would get
//     NXDOMAIN from the zone;
//   - the client address belongs to exactly one pod that is not on the
//     host network, has dnsPolicy ClusterFirst and no extra search
//     domains in dnsConfig: then its resolv.conf search list is known to
//     be <ns>.svc.<zone> svc.<zone> <zone> followed by Config.HostSearch;
//   - the question is <base>.<ns>.svc.<zone> for that pod's namespace,
//     i.e. the first expansion of the search list, and <base> has at least
//     two labels. Single labels are left alone: they are service and
//     namespace names, for which the search walk meets names that exist
//     without data, where resolvers differ (glibc continues, musl stops).
//
// The resolver then walks the rest of the list in the pod's order:
// <base>.svc.<zone>, <base>.<zone>, <base>.<host search...>, <base>. The
// first name with data of the asked type wins, and the answer is a CNAME
// from the question to that name followed by its records. A name that
// does not exist moves on to the next; anything else (a name that exists
// without that type, SERVFAIL, an upstream that does not answer, a CNAME
// out of the cluster) ends the walk, and the client gets the zone's
// NXDOMAIN, exactly as without autopath, and continues its own search.
// So autopath can save queries but never change what a name resolves to.
//
// Names are tried here until the first outside one; from there the rest
// of the list goes back to the server as a Chase, which tries each in
// order through Route (cluster names from the zone, others upstream).
//
// As with CoreDNS, a pod whose resolv.conf differs from what kubelet
// writes (e.g. edited at run time) or a node whose search list differs
// from Config.HostSearch would be answered as if it had the standard one.
func (r *Resolver) autopath(idx *index.Index, q Question, name string, nx *dns.Msg) (Result, bool) {
	if !r.autopathOn || q.Class != dns.ClassINET || !q.Client.IsValid() {
		return Result{}, false
	}
	ns, ok := idx.PodNamespace(q.Client)
	if !ok {
		return Result{}, false
	}
	zone := idx.Zone()
	base, ok := strings.CutSuffix(name, "."+ns+".svc."+zone)
	if !ok || dns.CountLabel(base+".") < 2 {
		return Result{}, false
	}

	candidates := make([]string, 0, 3+len(r.hostSearch))
	candidates = append(candidates, base+".svc."+zone, base+"."+zone)
	for _, d := range r.hostSearch {
		candidates = append(candidates, base+"."+d)
	}
	candidates = append(candidates, base+".")

	for i, c := range candidates {
		if _, ok := dns.IsDomainName(c); !ok {
			return Result{}, false // too long with this suffix: leave it to the client
		}
		auth := idx.Authority(c)
		if auth == index.NotAuthoritative {
			// From the first outside name on, the walk needs upstreams: hand
			// the rest of the list to the server, which asks Route.
			rest := candidates[i:]
			for j, o := range rest {
				if _, ok := dns.IsDomainName(o); !ok {
					rest = rest[:j]
					break
				}
			}
			nx.Authoritative = true
			fillNX(idx, name, nx)
			return Result{Msg: nx, Chase: &Chase{Names: rest, Search: true, Owner: q.Name, TTL: idx.TTL()}}, true
		}
		a := lookup(idx, auth, c, c, q.Type)
		switch {
		case a.positive(q.Type):
			m := nx
			m.Authoritative = true
			m.Answer = append([]dns.RR{cname(q.Name, c, idx.TTL())}, a.ans...)
			m.Extra = a.extra
			return Result{Msg: m, Autopath: true}, true
		case a.rcode == dns.RcodeNameError:
			continue
		default:
			return Result{}, false
		}
	}
	return Result{}, false
}

func fillNX(idx *index.Index, name string, m *dns.Msg) {
	m.Rcode = dns.RcodeNameError
	m.Ns = []dns.RR{idx.SOA(index.Zone, name)}
}

func cname(owner, target string, ttl uint32) *dns.CNAME {
	return &dns.CNAME{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: ttl}, Target: target}
}
