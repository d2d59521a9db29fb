package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/dns/resolver"
)

// FuzzHandle feeds arbitrary bytes to the message handling, over both
// transports, and checks that the server never panics, answers every
// packet that has a query header, and sends only what a client can parse,
// with the query's ID, within the size the transport allows.
//
//	go test -run XXX -fuzz FuzzHandle -fuzztime 60s ./internal/dns/server
func FuzzHandle(f *testing.F) {
	seed := func(name string, qtype uint16, edit func(m *dns.Msg)) {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		if edit != nil {
			edit(m)
		}
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	edns := func(m *dns.Msg) { m.SetEdns0(4096, true) }
	seed("kubernetes.default.svc.cluster.local.", dns.TypeA, nil)
	seed("KUBERNETES.default.svc.cluster.local.", dns.TypeAAAA, edns)
	seed("_http._tcp.web.default.svc.cluster.local.", dns.TypeSRV, edns)
	seed("big.default.svc.cluster.local.", dns.TypeA, nil)
	seed("1.0.96.10.in-addr.arpa.", dns.TypePTR, nil)
	seed("ext-internal.default.svc.cluster.local.", dns.TypeA, nil)
	seed("ext-loop.default.svc.cluster.local.", dns.TypeA, nil)
	seed("10-244-5-5.default.pod.cluster.local.", dns.TypeA, nil)
	seed("db.other.default.svc.cluster.local.", dns.TypeA, nil) // autopath from 127.0.0.1
	seed("google.com.default.svc.cluster.local.", dns.TypeA, nil)
	seed("cluster.local.", dns.TypeANY, edns)
	seed("cluster.local.", dns.TypeAXFR, nil)
	seed("example.com.", dns.TypeA, nil)
	seed("cluster.local.", dns.TypeSOA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify })
	seed("cluster.local.", dns.TypeSOA, func(m *dns.Msg) { m.SetEdns0(512, false); m.IsEdns0().SetVersion(3) })
	seed("cluster.local.", dns.TypeSOA, func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) })
	seed("cluster.local.", dns.TypeSOA, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS })
	f.Add([]byte{})
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 7, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1})

	// No upstream: the fuzzer must never reach the network.
	s, err := New(Options{Logger: quiet, Resolver: resolver.Config{Autopath: true, HostSearch: []string{"corp.example"}}})
	if err != nil {
		f.Fatal(err)
	}
	s.SetIndex(buildIndex(fixture()), time.Time{})
	client := netip.MustParseAddr("127.0.0.1")

	addr := netip.MustParseAddrPort("127.0.0.1:5353")
	buf := make([]byte, dns.MaxMsgSize)
	var key []byte
	f.Fuzz(func(t *testing.T, pkt []byte) {
		// The UDP loop's memo answers exactly as the full path does, the
		// first time and from the memo.
		full := s.handle(context.Background(), pkt, client, false)
		for range 2 {
			got, later := s.answerUDP(context.Background(), pkt, addr, buf, &key)
			if later == nil && !bytes.Equal(got, full) {
				t.Fatalf("read-loop answer differs from the full path's\nquery %x\n got %x\nwant %x", pkt, got, full)
			}
		}
		for _, tcp := range []bool{false, true} {
			resp := s.handle(context.Background(), pkt, client, tcp)
			if len(pkt) < 12 || pkt[2]&0x80 != 0 {
				if resp != nil {
					t.Fatalf("answered a packet without a query header: %x", pkt)
				}
				continue
			}
			if resp == nil {
				t.Fatalf("no answer to %x", pkt)
			}
			m := new(dns.Msg)
			if err := m.Unpack(resp); err != nil {
				t.Fatalf("answer does not parse: %v\nquery %x\nanswer %x", err, pkt, resp)
			}
			if !m.Response || m.Id != binary.BigEndian.Uint16(pkt) {
				t.Fatalf("answer QR=%v id=%d for query id %d", m.Response, m.Id, binary.BigEndian.Uint16(pkt))
			}
			limit := dns.MaxMsgSize
			if !tcp {
				limit = dns.MinMsgSize
				if m.IsEdns0() != nil {
					limit = int(s.opts.UDPSize)
				}
			}
			if len(resp) > limit {
				t.Fatalf("answer of %d bytes over %s (limit %d)", len(resp), map[bool]string{false: "UDP", true: "TCP"}[tcp], limit)
			}
		}
	})
}
