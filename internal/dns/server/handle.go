package server

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/dns/forward"
	"github.com/svcnet/svcnet/internal/dns/index"
	"github.com/svcnet/svcnet/internal/dns/resolver"
)

// Where an answer came from, for metrics and the query log.
const (
	sourceZone     = "zone"
	sourceForward  = "forward"
	sourceAutopath = "autopath"
	sourceInvalid  = "invalid"
)

// query is one query between reading and answering it. begin fills it
// with everything that needs no waiting; wait, when set, is the part that
// needs an upstream, so the UDP loop answers the rest on the spot and
// only gives upstream questions a goroutine of their own.
type query struct {
	start  time.Time
	tcp    bool
	client netip.Addr
	req    *dns.Msg // nil when the packet did not parse
	opt    *dns.OPT
	resp   *dns.Msg
	source string
	// raw is a finished response (FORMERR for what does not parse);
	// drop says to send nothing at all.
	raw  []byte
	drop bool
	wait func(ctx context.Context) (*dns.Msg, string)
	// until is set for an answer from the forward cache: when it stops
	// being the cache's answer.
	until time.Time
}

// handle turns one query off the wire into the response to send, or nil
// to send nothing, waiting for upstreams inline (TCP and tests). It never
// panics on any input (FuzzHandle checks).
func (s *Server) handle(ctx context.Context, raw []byte, client netip.Addr, tcp bool) []byte {
	q := s.begin(raw, client, tcp)
	if q.wait != nil {
		q.resp, q.source = q.wait(ctx)
	}
	return s.finish(&q, nil)
}

// begin parses raw and answers it as far as possible without waiting.
//
// Nothing is sent for packets too short to carry a header or with QR set:
// answering those would let a forged source bounce packets between
// servers.
func (s *Server) begin(raw []byte, client netip.Addr, tcp bool) query {
	return s.beginAt(s.idx.Load(), raw, client, tcp)
}

// beginAt is begin with the snapshot to answer from.
func (s *Server) beginAt(idx *index.Index, raw []byte, client netip.Addr, tcp bool) query {
	q := query{start: time.Now(), tcp: tcp, client: client}
	if len(raw) < 12 || raw[2]&0x80 != 0 {
		s.m.dropped.Inc()
		q.drop = true
		return q
	}
	req := new(dns.Msg)
	if err := req.Unpack(raw); err != nil {
		q.raw = formErrHeader(raw)
		q.source = sourceInvalid
		return q
	}
	q.req = req
	opt, optCount := edns(req)
	q.opt = opt
	switch {
	case optCount > 1:
		q.resp, q.source = resolver.ErrorReply(req, dns.RcodeFormatError), sourceInvalid
	case opt != nil && opt.Version() != 0:
		q.resp, q.source = resolver.ErrorReply(req, dns.RcodeBadVers), sourceInvalid // RFC 6891 6.1.3
	default:
		q.resp, q.source, q.until, q.wait = s.answer(idx, req, client, opt)
	}
	return q
}

// finish sizes and packs the response (into buf when it is big enough)
// and records it.
func (s *Server) finish(q *query, buf []byte) []byte {
	proto := "udp"
	if q.tcp {
		proto = "tcp"
	}
	if q.drop {
		return nil
	}
	if q.raw != nil {
		s.observe(q.start, proto, nil, dns.RcodeFormatError, q.source, q.client, len(q.raw))
		return q.raw
	}
	req, resp, opt := q.req, q.resp, q.opt
	size := dns.MaxMsgSize
	if !q.tcp {
		size = dns.MinMsgSize
		if opt != nil {
			size = int(min(max(opt.UDPSize(), dns.MinMsgSize), s.opts.UDPSize))
		}
	}
	if opt != nil {
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.SetUDPSize(s.opts.UDPSize)
		o.SetDo(opt.Do())
		resp.Extra = append(resp.Extra, o)
	}
	// Pack once in the common case; only an answer that is too big pays
	// for measuring and cutting.
	resp.Compress = true
	out, err := resp.PackBuffer(buf)
	if err == nil && len(out) > size {
		if fit(resp, size) {
			s.m.truncated.WithLabelValues(proto).Inc()
		}
		out, err = resp.PackBuffer(buf)
	}
	if err != nil {
		// Data from an upstream that does not pack again; say so rather
		// than send nothing.
		s.log.Debug("dns pack", "err", err)
		resp = resolver.ErrorReply(req, dns.RcodeServerFailure)
		out, _ = resp.Pack()
	}
	s.observe(q.start, proto, req, resp.Rcode, q.source, q.client, len(out))
	return out
}

// answer resolves a well-formed request from the zone, or from the
// forwarder's cache when it has one (until then says how long that
// answer holds). What needs an upstream comes back as wait; resp is then
// nil.
func (s *Server) answer(idx *index.Index, req *dns.Msg, client netip.Addr, opt *dns.OPT) (
	resp *dns.Msg, source string, until time.Time, wait func(context.Context) (*dns.Msg, string)) {
	res := s.resolver.Answer(idx, req, client)
	do := opt != nil && opt.Do()
	up := s.opts.Upstream
	var q dns.Question // Forward and Chase imply exactly one question
	if len(req.Question) == 1 {
		q = req.Question[0]
	}

	if res.Forward {
		if up == nil {
			m := resolver.ErrorReply(req, dns.RcodeRefused)
			m.RecursionAvailable = false
			return m, sourceForward, time.Time{}, nil
		}
		if c, ok := up.(CachedUpstream); ok {
			if ans, until, ok := c.Cached(q, do); ok {
				return forwarded(req, ans, do), sourceForward, until, nil
			}
		}
		return nil, "", time.Time{}, func(ctx context.Context) (*dns.Msg, string) {
			fctx, cancel := context.WithTimeout(ctx, s.opts.ForwardTimeout)
			defer cancel()
			ans, err := up.Exchange(fctx, q, do)
			if errors.Is(err, forward.ErrNoRoute) {
				// As with no upstream at all: this server does not recurse
				// for the name.
				m := resolver.ErrorReply(req, dns.RcodeRefused)
				m.RecursionAvailable = false
				return m, sourceForward
			}
			if err != nil {
				s.log.Debug("dns forward", "name", q.Name, "err", err)
				return resolver.ErrorReply(req, dns.RcodeServerFailure), sourceForward
			}
			return forwarded(req, ans, do), sourceForward
		}
	}

	source = sourceZone
	if res.Autopath {
		source = sourceAutopath
		s.m.autopath.Inc()
	}
	if res.Chase == nil {
		return res.Msg, source, time.Time{}, nil
	}
	return nil, "", time.Time{}, func(ctx context.Context) (*dns.Msg, string) {
		fctx, cancel := context.WithTimeout(ctx, s.opts.ForwardTimeout)
		defer cancel()
		var upstream resolver.Exchange
		if up != nil {
			upstream = func(name string) (*dns.Msg, error) {
				return up.Exchange(fctx, dns.Question{Name: name, Qtype: q.Qtype, Qclass: q.Qclass}, do)
			}
		}
		if res.Chase.Complete(res.Msg, q.Qtype, resolver.Route(idx, q.Qtype, upstream)) {
			source = sourceAutopath
			s.m.autopath.Inc()
		}
		return res.Msg, source
	}
}

// forwarded is the response to req carrying an upstream's answer.
func forwarded(req, ans *dns.Msg, do bool) *dns.Msg {
	m := resolver.ErrorReply(req, ans.Rcode)
	m.Answer, m.Ns, m.Extra = ans.Answer, ans.Ns, ans.Extra
	m.AuthenticatedData = ans.AuthenticatedData && do
	return m
}

// edns returns the request's OPT record and how many it has (more than
// one is a format error, RFC 6891 6.1.1).
func edns(m *dns.Msg) (*dns.OPT, int) {
	var first *dns.OPT
	n := 0
	for _, rr := range m.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			if first == nil {
				first = o
			}
			n++
		}
	}
	return first, n
}

// formErrHeader answers a packet that does not parse: its ID, opcode and
// RD echoed, FORMERR, no sections (we could not read them).
func formErrHeader(raw []byte) []byte {
	out := make([]byte, 12)
	copy(out, raw[:2])
	out[2] = 0x80 | raw[2]&0x79 // QR, opcode and RD from the query
	out[3] = 0x80 | dns.RcodeFormatError
	binary.BigEndian.PutUint16(out[4:], 0)
	return out
}

// fit makes m fit in size bytes: first by dropping additional records,
// which are optional (RFC 2181 9), then by cutting the answer and setting
// TC so that the client asks again over TCP. It reports whether TC was
// set.
func fit(m *dns.Msg, size int) bool {
	m.Compress = true
	if m.Len() <= size {
		return false
	}
	var opt []dns.RR
	for _, rr := range m.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			opt = append(opt, rr)
		}
	}
	m.Extra = opt
	m.Compress = true
	if m.Len() <= size {
		return false
	}
	m.Truncate(size)
	m.Compress = true
	return m.Truncated
}

func (s *Server) observe(start time.Time, proto string, req *dns.Msg, rcode int, source string, client netip.Addr, size int) {
	d := time.Since(start)
	var qtype uint16
	one := req != nil && len(req.Question) == 1
	if one {
		qtype = req.Question[0].Qtype
	}
	s.m.count(proto, one, qtype, rcode, source)
	s.m.observe(source, d.Seconds())
	if s.opts.QueryLog {
		name, typ := "", "none"
		if one {
			name, typ = req.Question[0].Name, typeLabelAt(typeIndex[qtype])
		}
		s.log.Info("dns query", "client", client.String(), "proto", proto, "name", name, "type", typ,
			"rcode", rcodeLabel(rcode), "source", source, "size", size, "duration", d)
	}
}
