package resolver

import (
	"errors"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/dns/index"
)

// Chase lists names, outside the zone or past an outside one, whose
// answers complete a Result. Without them the Result's Msg is still
// correct, only less complete: a dead upstream costs an ExternalName its
// target's addresses and autopath its shortcut, never a cluster answer.
type Chase struct {
	// Names to resolve with the question's type and class. Autopath's may
	// include cluster names after outside ones; Route answers both kinds.
	Names []string
	// Search is set for autopath: try Names in order and answer with the
	// first that has data, behind a CNAME from Owner. Otherwise (an
	// ExternalName target) Names has one entry, and its answer is
	// appended after the CNAME chain already in Msg.
	Search bool
	Owner  string
	TTL    uint32
}

// Exchange answers one question about name, with the type and class of
// the question being chased. Errors mean no answer (timeouts, every
// upstream down).
type Exchange func(name string) (*dns.Msg, error)

// Complete finishes m, the Msg of the Result holding c, in place, asking
// through ask (normally Route). autopathed reports whether an autopath
// candidate answered.
func (c *Chase) Complete(m *dns.Msg, qtype uint16, ask Exchange) (autopathed bool) {
	if c.Search {
		for _, name := range c.Names {
			up, err := ask(name)
			if err != nil || up == nil {
				return false
			}
			switch {
			case up.Rcode == dns.RcodeSuccess && hasType(up.Answer, qtype):
				m.Rcode = dns.RcodeSuccess
				m.Authoritative = false // the data is the upstream's
				m.Answer = append([]dns.RR{cname(c.Owner, name, c.TTL)}, answerOnly(up.Answer)...)
				m.Ns = nil
				m.Extra = nil
				return true
			case up.Rcode == dns.RcodeNameError:
				continue
			default:
				return false // NODATA or failure: leave the search to the client
			}
		}
		return false
	}
	if len(c.Names) != 1 {
		return false
	}
	up, err := ask(c.Names[0])
	if err != nil || up == nil {
		return false // the CNAME alone: the client may chase it itself
	}
	switch up.Rcode {
	case dns.RcodeSuccess, dns.RcodeNameError:
	default:
		return false
	}
	m.Authoritative = false
	m.Rcode = up.Rcode // RFC 6604: the rcode is the last name's in the chain
	m.Answer = append(m.Answer, answerOnly(up.Answer)...)
	if len(up.Answer) == 0 || up.Rcode == dns.RcodeNameError {
		m.Ns = answerOnly(up.Ns) // the upstream's SOA, for negative caching
	}
	return false
}

func hasType(rrs []dns.RR, qtype uint16) bool {
	for _, rr := range rrs {
		if rr.Header().Rrtype == qtype || qtype == dns.TypeANY {
			return true
		}
	}
	return false
}

// answerOnly drops records that must not be relayed from one message into
// another: OPT and signatures over messages.
func answerOnly(rrs []dns.RR) []dns.RR {
	out := make([]dns.RR, 0, len(rrs))
	for _, rr := range rrs {
		switch rr.Header().Rrtype {
		case dns.TypeOPT, dns.TypeTSIG, dns.TypeSIG:
			continue
		}
		out = append(out, rr)
	}
	return out
}

// errNoUpstream stops a chase when there is no upstream to ask.
var errNoUpstream = errors.New("no upstream")

// Route returns the Exchange a Chase needs: names idx is authoritative
// for are answered from idx (the same snapshot the Result came from),
// others go to upstream, which may be nil.
func Route(idx *index.Index, qtype uint16, upstream Exchange) Exchange {
	return func(name string) (*dns.Msg, error) {
		c := index.Canonical(name)
		auth := idx.Authority(c)
		if auth == index.NotAuthoritative {
			if upstream == nil {
				return nil, errNoUpstream
			}
			return upstream(name)
		}
		a := lookup(idx, auth, name, c, qtype)
		m := new(dns.Msg)
		m.Authoritative = true
		a.fill(m)
		return m, nil
	}
}
