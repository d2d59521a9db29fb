package images

import (
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// corednsWhoami is the whoami plugin's reply to q from client over proto
// ("udp", "tcp"), for any name and type: an empty answer section, and
// in the additional one the client's address (an A or AAAA record named
// as the question) and its port and transport (an SRV record named
// _PROTO.NAME, target "."), all with a TTL of 0, as CoreDNS answers.
// Names are in lower case, as CoreDNS's plugins see them.
func corednsWhoami(q *dns.Msg, client netip.AddrPort, proto string) *dns.Msg {
	qs := q.Question[0]
	name := strings.ToLower(qs.Name)
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	hdr := dns.RR_Header{Name: name, Class: qs.Qclass}
	ip := client.Addr().Unmap()
	switch {
	case ip.Is4():
		hdr.Rrtype = dns.TypeA
		m.Extra = append(m.Extra, &dns.A{Hdr: hdr, A: ip.AsSlice()})
	case ip.Is6():
		hdr.Rrtype = dns.TypeAAAA
		m.Extra = append(m.Extra, &dns.AAAA{Hdr: hdr, AAAA: ip.AsSlice()})
	}
	srvName := "_" + proto + "." + name
	if name == "." {
		srvName = "_" + proto + "."
	}
	srv := &dns.SRV{
		Hdr:    dns.RR_Header{Name: srvName, Rrtype: dns.TypeSRV, Class: qs.Qclass},
		Port:   client.Port(),
		Target: ".",
	}
	m.Extra = append(m.Extra, srv)
	return m
}
