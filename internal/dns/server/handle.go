package server

import (
	"context"
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/dns/resolver"
)

// Where an answer came from, for metrics and the query log.
const (
	sourceZone     = "zone"
	sourceForward  = "forward"
	sourceAutopath = "autopath"
	sourceInvalid  = "invalid"
)

// handle turns one query off the wire into the response to send, or nil
// to send nothing. It never panics on any input (FuzzHandle checks).
//
// Nothing is sent for packets too short to carry a header or with QR set:
// answering those would let a forged source bounce packets between
// servers.
func (s *Server) handle(ctx context.Context, raw []byte, client netip.Addr, tcp bool) []byte {
	start := time.Now()
	proto := "udp"
	if tcp {
		proto = "tcp"
	}
	if len(raw) < 12 || raw[2]&0x80 != 0 {
		s.m.dropped.Inc()
		return nil
	}
	req := new(dns.Msg)
	if err := req.Unpack(raw); err != nil {
		resp := formErrHeader(raw)
		s.observe(start, proto, nil, dns.RcodeFormatError, sourceInvalid, client, len(resp))
		return resp
	}

	opt, optCount := edns(req)
	var resp *dns.Msg
	source := sourceZone
	switch {
	case optCount > 1:
		resp = errorReply(req, dns.RcodeFormatError)
		source = sourceInvalid
	case opt != nil && opt.Version() != 0:
		resp = errorReply(req, dns.RcodeBadVers) // RFC 6891 6.1.3
		source = sourceInvalid
	default:
		resp, source = s.answer(ctx, req, client, opt)
	}

	size := dns.MaxMsgSize
	if !tcp {
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
	out, err := resp.Pack()
	if err == nil && len(out) > size {
		if fit(resp, size) {
			s.m.truncated.WithLabelValues(proto).Inc()
		}
		out, err = resp.Pack()
	}
	if err != nil {
		// Data from an upstream that does not pack again; say so rather
		// than send nothing.
		s.log.Debug("dns pack", "err", err)
		resp = errorReply(req, dns.RcodeServerFailure)
		out, _ = resp.Pack()
	}
	s.observe(start, proto, req, resp.Rcode, source, client, len(out))
	return out
}

// answer resolves a well-formed request.
func (s *Server) answer(ctx context.Context, req *dns.Msg, client netip.Addr, opt *dns.OPT) (*dns.Msg, string) {
	idx := s.idx.Load() // one snapshot for the whole answer
	res := s.resolver.Answer(idx, req, client)
	do := opt != nil && opt.Do()
	up := s.opts.Upstream
	var q dns.Question // Forward and Chase imply exactly one question
	if len(req.Question) == 1 {
		q = req.Question[0]
	}

	if res.Forward {
		if up == nil {
			m := errorReply(req, dns.RcodeRefused)
			m.RecursionAvailable = false
			return m, sourceForward
		}
		fctx, cancel := context.WithTimeout(ctx, s.opts.ForwardTimeout)
		defer cancel()
		ans, err := up.Exchange(fctx, q, do)
		if err != nil {
			s.log.Debug("dns forward", "name", q.Name, "err", err)
			return errorReply(req, dns.RcodeServerFailure), sourceForward
		}
		m := errorReply(req, ans.Rcode)
		m.Answer, m.Ns, m.Extra = ans.Answer, ans.Ns, ans.Extra
		m.AuthenticatedData = ans.AuthenticatedData && do
		return m, sourceForward
	}

	source := sourceZone
	if res.Autopath {
		source = sourceAutopath
	}
	if res.Chase != nil {
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
		}
	}
	if source == sourceAutopath {
		s.m.autopath.Inc()
	}
	return res.Msg, source
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

func errorReply(req *dns.Msg, rcode int) *dns.Msg {
	m := new(dns.Msg)
	m.Id = req.Id
	m.Response = true
	m.Opcode = req.Opcode
	m.RecursionDesired = req.RecursionDesired
	m.CheckingDisabled = req.CheckingDisabled
	m.RecursionAvailable = true
	if len(req.Question) == 1 {
		m.Question = []dns.Question{req.Question[0]}
	}
	m.Rcode = rcode
	return m
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
	qtype, name := "none", ""
	if req != nil && len(req.Question) == 1 {
		qtype = typeLabel(req.Question[0].Qtype)
		name = req.Question[0].Name
	}
	s.m.requests.WithLabelValues(proto, qtype).Inc()
	s.m.responses.WithLabelValues(qtype, rcodeLabel(rcode), source).Inc()
	s.m.duration.WithLabelValues(source).Observe(d.Seconds())
	if s.opts.QueryLog {
		s.log.Info("dns query", "client", client.String(), "proto", proto, "name", name, "type", qtype,
			"rcode", rcodeLabel(rcode), "source", source, "size", size, "duration", d)
	}
}
