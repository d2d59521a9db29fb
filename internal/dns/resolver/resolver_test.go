package resolver

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/internal/dns/index"
)

func fixtureIndex(t *testing.T, mode index.PodsMode) *index.Index {
	t.Helper()
	c := dnstest.Fixture()
	return index.Build(index.Options{
		Pods: mode,
		ReverseCIDRs: []netip.Prefix{
			netip.MustParsePrefix("10.96.0.0/16"),
			netip.MustParsePrefix("10.244.0.0/16"),
			netip.MustParsePrefix("fd00::/8"),
		},
		Nameservers: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		Serial:      42,
	}, c.Services, c.Slices, c.Pods)
}

// rrs renders records one per string with single spaces, the way the
// cases below spell them.
func rrs(rr []dns.RR) []string {
	out := make([]string, 0, len(rr))
	for _, r := range rr {
		out = append(out, strings.Join(strings.Fields(r.String()), " "))
	}
	return out
}

func types(rr []dns.RR) []string {
	out := make([]string, 0, len(rr))
	for _, r := range rr {
		out = append(out, dns.TypeToString[r.Header().Rrtype]+" "+r.Header().Name)
	}
	return out
}

const z = ".cluster.local."

type rcase struct {
	name   string
	qname  string
	qtype  uint16
	qclass uint16 // IN when 0
	client string
	mode   index.PodsMode

	rcode   int
	answer  []string // exact, in order
	ns      []string // "TYPE owner"
	extra   []string // exact, in order
	forward bool
	chase   *Chase
	notAA   bool
}

func runCases(t *testing.T, r *Resolver, cases []rcase) {
	t.Helper()
	idx := map[index.PodsMode]*index.Index{}
	for _, m := range []index.PodsMode{index.PodsDisabled, index.PodsInsecure, index.PodsVerified} {
		idx[m] = fixtureIndex(t, m)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := Question{Name: tc.qname, Type: tc.qtype, Class: tc.qclass}
			if q.Class == 0 {
				q.Class = dns.ClassINET
			}
			if tc.client != "" {
				q.Client = netip.MustParseAddr(tc.client)
			}
			res := r.Resolve(idx[tc.mode], q)
			if res.Forward != tc.forward {
				t.Fatalf("Forward = %v, want %v", res.Forward, tc.forward)
			}
			if tc.forward {
				if res.Msg != nil {
					t.Errorf("forwarded question has a message: %v", res.Msg)
				}
				return
			}
			m := res.Msg
			if m.Rcode != tc.rcode {
				t.Errorf("rcode = %s, want %s", dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.rcode])
			}
			if got := rrs(m.Answer); !slices.Equal(got, tc.answer) {
				t.Errorf("answer:\n got %q\nwant %q", got, tc.answer)
			}
			if got := types(m.Ns); !slices.Equal(got, tc.ns) {
				t.Errorf("authority = %q, want %q", got, tc.ns)
			}
			if got := rrs(m.Extra); !slices.Equal(got, tc.extra) {
				t.Errorf("additional:\n got %q\nwant %q", got, tc.extra)
			}
			wantAA := tc.rcode != dns.RcodeFormatError && tc.rcode != dns.RcodeRefused &&
				tc.rcode != dns.RcodeNotImplemented && tc.rcode != dns.RcodeServerFailure && !tc.notAA
			if m.Authoritative != wantAA {
				t.Errorf("AA = %v, want %v", m.Authoritative, wantAA)
			}
			if len(m.Question) != 1 || m.Question[0].Name != tc.qname || !m.Response {
				t.Errorf("question/QR not echoed: %v", m.Question)
			}
			switch {
			case tc.chase == nil && res.Chase != nil:
				t.Errorf("unexpected chase %+v", *res.Chase)
			case tc.chase != nil && res.Chase == nil:
				t.Errorf("no chase, want %+v", *tc.chase)
			case tc.chase != nil:
				c := *res.Chase
				if !slices.Equal(c.Names, tc.chase.Names) || c.Search != tc.chase.Search || c.Owner != tc.chase.Owner {
					t.Errorf("chase = %+v, want %+v", c, *tc.chase)
				}
			}
			if _, err := m.Pack(); err != nil && tc.rcode != dns.RcodeFormatError {
				t.Errorf("answer does not pack: %v", err)
			}
		})
	}
}

func TestResolveRecords(t *testing.T) {
	soa := []string{"SOA cluster.local."}
	soa4 := []string{"SOA in-addr.arpa."}
	const (
		A, AAAA, SRV, PTR, TXT = dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeTXT
		NX                     = dns.RcodeNameError
	)
	cases := []rcase{
		// 2.2 schema version
		{name: "dns-version", qname: "dns-version" + z, qtype: TXT,
			answer: []string{`dns-version.cluster.local. 5 IN TXT "1.1.0"`}},
		{name: "dns-version wrong type is NODATA", qname: "dns-version" + z, qtype: A, ns: soa},

		// 2.3 ClusterIP services
		{name: "clusterIP A", qname: "kubernetes.default.svc" + z, qtype: A,
			answer: []string{"kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"}},
		{name: "case-insensitive, owner as asked", qname: "KUBERNETES.Default.SVC.cluster.LOCAL.", qtype: A,
			answer: []string{"KUBERNETES.Default.SVC.cluster.LOCAL. 5 IN A 10.96.0.1"}},
		{name: "clusterIP AAAA on single-stack is NODATA", qname: "kubernetes.default.svc" + z, qtype: AAAA, ns: soa},
		{name: "clusterIP MX is NODATA", qname: "kubernetes.default.svc" + z, qtype: dns.TypeMX, ns: soa},
		{name: "clusterIP ANY", qname: "kubernetes.default.svc" + z, qtype: dns.TypeANY,
			answer: []string{"kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1",
				"kubernetes.default.svc.cluster.local. 5 IN SRV 0 100 443 kubernetes.default.svc.cluster.local."},
			extra: []string{"kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"}},
		// As CoreDNS: the Service's own name has an SRV record per port.
		{name: "SRV at the Service's name", qname: "kubernetes.default.svc" + z, qtype: SRV,
			answer: []string{"kubernetes.default.svc.cluster.local. 5 IN SRV 0 100 443 kubernetes.default.svc.cluster.local."},
			extra:  []string{"kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"}},
		{name: "dual-stack A", qname: "dual.default.svc" + z, qtype: A,
			answer: []string{"dual.default.svc.cluster.local. 5 IN A 10.96.0.30"}},
		{name: "dual-stack AAAA", qname: "dual.default.svc" + z, qtype: AAAA,
			answer: []string{"dual.default.svc.cluster.local. 5 IN AAAA fd00::30"}},
		{name: "service without IP yet is NODATA", qname: "pending.default.svc" + z, qtype: A, ns: soa},
		{name: "other namespace", qname: "db.other.svc" + z, qtype: A,
			answer: []string{"db.other.svc.cluster.local. 5 IN A 10.96.1.5"}},
		{name: "missing service", qname: "nope.default.svc" + z, qtype: A, rcode: NX, ns: soa},
		{name: "slice without service", qname: "ghost.default.svc" + z, qtype: A, rcode: NX, ns: soa},
		{name: "below a service", qname: "a.b.kubernetes.default.svc" + z, qtype: A, rcode: NX, ns: soa},

		// SRV for named ports of ClusterIP services
		{name: "SRV clusterIP", qname: "_https._tcp.kubernetes.default.svc" + z, qtype: SRV,
			answer: []string{"_https._tcp.kubernetes.default.svc.cluster.local. 5 IN SRV 0 100 443 kubernetes.default.svc.cluster.local."},
			extra:  []string{"kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"}},
		{name: "SRV dual-stack adds A and AAAA", qname: "_dns._udp.dual.default.svc" + z, qtype: SRV,
			answer: []string{"_dns._udp.dual.default.svc.cluster.local. 5 IN SRV 0 100 53 dual.default.svc.cluster.local."},
			extra:  []string{"dual.default.svc.cluster.local. 5 IN A 10.96.0.30", "dual.default.svc.cluster.local. 5 IN AAAA fd00::30"}},
		{name: "SRV case-insensitive", qname: "_HTTP._TCP.hostnames.default.svc" + z, qtype: SRV,
			answer: []string{"_HTTP._TCP.hostnames.default.svc.cluster.local. 5 IN SRV 0 100 80 hostnames.default.svc.cluster.local."},
			extra:  []string{"hostnames.default.svc.cluster.local. 5 IN A 10.96.0.27"}},
		{name: "SRV wrong protocol", qname: "_https._udp.kubernetes.default.svc" + z, qtype: SRV, rcode: NX, ns: soa},
		{name: "SRV of pending service without IP", qname: "_http._tcp.pending.default.svc" + z, qtype: SRV,
			answer: []string{"_http._tcp.pending.default.svc.cluster.local. 5 IN SRV 0 100 80 pending.default.svc.cluster.local."}},
		// As CoreDNS: address questions at SRV names get the addresses.
		{name: "SRV name asked for A", qname: "_https._tcp.kubernetes.default.svc" + z, qtype: A,
			answer: []string{"_https._tcp.kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"}},
		{name: "protocol label is an empty non-terminal", qname: "_tcp.kubernetes.default.svc" + z, qtype: SRV, ns: soa},

		// 2.3.3 / 2.4.3 PTR
		{name: "PTR service", qname: "1.0.96.10.in-addr.arpa.", qtype: PTR,
			answer: []string{"1.0.96.10.in-addr.arpa. 5 IN PTR kubernetes.default.svc.cluster.local."}},
		{name: "PTR upper-case arpa", qname: "1.0.96.10.IN-ADDR.ARPA.", qtype: PTR,
			answer: []string{"1.0.96.10.IN-ADDR.ARPA. 5 IN PTR kubernetes.default.svc.cluster.local."}},
		{name: "PTR IPv6 service", qname: index.ReverseName(netip.MustParseAddr("fd00::30")), qtype: PTR,
			answer: []string{index.ReverseName(netip.MustParseAddr("fd00::30")) + " 5 IN PTR dual.default.svc.cluster.local."}},
		{name: "PTR headless endpoint with hostname", qname: "1.0.244.10.in-addr.arpa.", qtype: PTR,
			answer: []string{"1.0.244.10.in-addr.arpa. 5 IN PTR web-0.web.default.svc.cluster.local."}},
		{name: "PTR headless endpoint without hostname", qname: "2.0.244.10.in-addr.arpa.", qtype: PTR,
			answer: []string{"2.0.244.10.in-addr.arpa. 5 IN PTR 10-244-0-2.web.default.svc.cluster.local."}},
		{name: "PTR IPv6 headless endpoint", qname: index.ReverseName(netip.MustParseAddr("fd00:10::5")), qtype: PTR,
			answer: []string{index.ReverseName(netip.MustParseAddr("fd00:10::5")) + " 5 IN PTR v6pod.web6.default.svc.cluster.local."}},
		{name: "PTR not-ready endpoint in a cluster range", qname: "3.0.244.10.in-addr.arpa.", qtype: PTR, rcode: NX, ns: soa4},
		{name: "PTR unknown in a cluster range", qname: "99.99.96.10.in-addr.arpa.", qtype: PTR, rcode: NX, ns: soa4},
		{name: "PTR name asked for A", qname: "1.0.96.10.in-addr.arpa.", qtype: A, ns: soa4},
		{name: "PTR outside the cluster is forwarded", qname: "8.8.8.8.in-addr.arpa.", qtype: PTR, forward: true},
		{name: "partial reverse name is forwarded", qname: "96.10.in-addr.arpa.", qtype: PTR, forward: true},
		{name: "malformed reverse name is forwarded", qname: "300.0.96.10.in-addr.arpa.", qtype: PTR, forward: true},

		// 2.4 headless services
		{name: "headless A: ready endpoints of both slices, once each", qname: "web.default.svc" + z, qtype: A,
			answer: []string{
				"web.default.svc.cluster.local. 5 IN A 10.244.0.1",
				"web.default.svc.cluster.local. 5 IN A 10.244.0.2",
				"web.default.svc.cluster.local. 5 IN A 10.244.0.4",
			}},
		{name: "headless hostname", qname: "web-0.web.default.svc" + z, qtype: A,
			answer: []string{"web-0.web.default.svc.cluster.local. 5 IN A 10.244.0.1"}},
		{name: "headless hostname from second slice", qname: "Web-2.web.default.svc" + z, qtype: A,
			answer: []string{"Web-2.web.default.svc.cluster.local. 5 IN A 10.244.0.4"}},
		{name: "headless endpoint without hostname by dashed IP", qname: "10-244-0-2.web.default.svc" + z, qtype: A,
			answer: []string{"10-244-0-2.web.default.svc.cluster.local. 5 IN A 10.244.0.2"}},
		{name: "headless endpoint with hostname has no dashed name", qname: "10-244-0-1.web.default.svc" + z, qtype: A, rcode: NX, ns: soa},
		{name: "not-ready endpoint is not published", qname: "10-244-0-3.web.default.svc" + z, qtype: A, rcode: NX, ns: soa},
		// The weight is CoreDNS's: spread over the records before
		// duplicates go (an endpoint listed by two slices counts twice).
		{name: "headless SRV: one per endpoint", qname: "_http._tcp.web.default.svc" + z, qtype: SRV,
			answer: []string{
				"_http._tcp.web.default.svc.cluster.local. 5 IN SRV 0 25 8080 web-0.web.default.svc.cluster.local.",
				"_http._tcp.web.default.svc.cluster.local. 5 IN SRV 0 25 8080 10-244-0-2.web.default.svc.cluster.local.",
				"_http._tcp.web.default.svc.cluster.local. 5 IN SRV 0 25 8080 web-2.web.default.svc.cluster.local.",
			},
			extra: []string{
				"web-0.web.default.svc.cluster.local. 5 IN A 10.244.0.1",
				"10-244-0-2.web.default.svc.cluster.local. 5 IN A 10.244.0.2",
				"web-2.web.default.svc.cluster.local. 5 IN A 10.244.0.4",
			}},
		{name: "headless IPv6 AAAA", qname: "web6.default.svc" + z, qtype: AAAA,
			answer: []string{"web6.default.svc.cluster.local. 5 IN AAAA fd00:10::5"}},
		{name: "headless IPv6 asked for A is NODATA", qname: "web6.default.svc" + z, qtype: A, ns: soa},
		{name: "headless IPv6 hostname", qname: "v6pod.web6.default.svc" + z, qtype: AAAA,
			answer: []string{"v6pod.web6.default.svc.cluster.local. 5 IN AAAA fd00:10::5"}},
		{name: "headless without ready endpoints is NXDOMAIN", qname: "empty.default.svc" + z, qtype: A, rcode: NX, ns: soa},
		{name: "publishNotReadyAddresses publishes not-ready endpoints", qname: "warming.default.svc" + z, qtype: A,
			answer: []string{"warming.default.svc.cluster.local. 5 IN A 10.244.1.1"}},

		// 2.5 ExternalName
		{name: "ExternalName outside: CNAME, target chased upstream", qname: "ext.default.svc" + z, qtype: A,
			answer: []string{"ext.default.svc.cluster.local. 5 IN CNAME hostnames.example.com."},
			chase:  &Chase{Names: []string{"hostnames.example.com."}}},
		{name: "ExternalName asked for CNAME", qname: "ext.default.svc" + z, qtype: dns.TypeCNAME,
			answer: []string{"ext.default.svc.cluster.local. 5 IN CNAME hostnames.example.com."}},
		{name: "ExternalName inside the zone is resolved in the same answer", qname: "ext-internal.default.svc" + z, qtype: A,
			answer: []string{
				"ext-internal.default.svc.cluster.local. 5 IN CNAME kubernetes.default.svc.cluster.local.",
				"kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1",
			}},
		{name: "ExternalName to a missing cluster name", qname: "ext-missing.default.svc" + z, qtype: A, rcode: NX,
			answer: []string{"ext-missing.default.svc.cluster.local. 5 IN CNAME nope.default.svc.cluster.local."}, ns: soa},
		{name: "ExternalName loop", qname: "ext-loop.default.svc" + z, qtype: A, rcode: dns.RcodeServerFailure},

		// The zone's own structure.
		{name: "apex SOA", qname: "cluster.local.", qtype: dns.TypeSOA,
			answer: []string{"cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 42 7200 1800 86400 5"}},
		{name: "apex NS with glue", qname: "cluster.local.", qtype: dns.TypeNS,
			answer: []string{"cluster.local. 5 IN NS ns.dns.cluster.local."},
			extra:  []string{"ns.dns.cluster.local. 5 IN A 10.96.0.10"}},
		{name: "nameserver address", qname: "ns.dns" + z, qtype: A,
			answer: []string{"ns.dns.cluster.local. 5 IN A 10.96.0.10"}},
		{name: "svc is an empty non-terminal", qname: "svc" + z, qtype: A, ns: soa},
		{name: "namespace with services is NODATA", qname: "other.svc" + z, qtype: A, ns: soa},
		{name: "namespace without services is NXDOMAIN", qname: "nons.svc" + z, qtype: A, rcode: NX, ns: soa},
		{name: "unknown name in zone", qname: "foo" + z, qtype: A, rcode: NX, ns: soa},

		// Deprecated pod records, three modes.
		{name: "pod verified", mode: index.PodsVerified, qname: "10-244-5-5.default.pod" + z, qtype: A,
			answer: []string{"10-244-5-5.default.pod.cluster.local. 5 IN A 10.244.5.5"}},
		{name: "pod verified wrong namespace", mode: index.PodsVerified, qname: "10-244-5-5.other.pod" + z, qtype: A, rcode: NX, ns: soa},
		{name: "pod verified IPv6", mode: index.PodsVerified, qname: "fd00-10--6.other.pod" + z, qtype: AAAA,
			answer: []string{"fd00-10--6.other.pod.cluster.local. 5 IN AAAA fd00:10::6"}},
		{name: "pod verified IPv6 spelled long", mode: index.PodsVerified, qname: "fd00-10-0-0-0-0-0-6.other.pod" + z, qtype: AAAA,
			answer: []string{"fd00-10-0-0-0-0-0-6.other.pod.cluster.local. 5 IN AAAA fd00:10::6"}},
		{name: "pod verified finished pod", mode: index.PodsVerified, qname: "10-244-5-7.default.pod" + z, qtype: A, rcode: NX, ns: soa},
		{name: "pod verified namespace", mode: index.PodsVerified, qname: "default.pod" + z, qtype: A, ns: soa},
		{name: "pod verified namespace without pods", mode: index.PodsVerified, qname: "nopods.pod" + z, qtype: A, rcode: NX, ns: soa},
		{name: "pod verified wrong type", mode: index.PodsVerified, qname: "10-244-5-5.default.pod" + z, qtype: AAAA, ns: soa},
		{name: "pod insecure any address", mode: index.PodsInsecure, qname: "1-2-3-4.anything.pod" + z, qtype: A,
			answer: []string{"1-2-3-4.anything.pod.cluster.local. 5 IN A 1.2.3.4"}},
		{name: "pod insecure bad label", mode: index.PodsInsecure, qname: "1-2-3-999.anything.pod" + z, qtype: A, rcode: NX, ns: soa},
		{name: "pod insecure too deep", mode: index.PodsInsecure, qname: "x.1-2-3-4.anything.pod" + z, qtype: A, rcode: NX, ns: soa},
		{name: "pod disabled", mode: index.PodsDisabled, qname: "10-244-5-5.default.pod" + z, qtype: A, rcode: NX, ns: soa},
		{name: "pod zone disabled", mode: index.PodsDisabled, qname: "pod" + z, qtype: A, rcode: NX, ns: soa},
		{name: "pod zone enabled", mode: index.PodsInsecure, qname: "pod" + z, qtype: A, ns: soa},

		// Outside names, bad questions.
		{name: "outside name is forwarded", qname: "example.com.", qtype: A, forward: true},
		{name: "root is forwarded", qname: ".", qtype: dns.TypeNS, forward: true},
		{name: "class ANY is answered", qname: "kubernetes.default.svc" + z, qtype: A, qclass: dns.ClassANY,
			answer: []string{"kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"}},
		{name: "class CHAOS is refused", qname: "version.bind.", qtype: TXT, qclass: dns.ClassCHAOS, rcode: dns.RcodeRefused},
		{name: "class CHAOS in zone is refused", qname: "kubernetes.default.svc" + z, qtype: A, qclass: dns.ClassCHAOS, rcode: dns.RcodeRefused},
		{name: "AXFR refused", qname: "cluster.local.", qtype: dns.TypeAXFR, rcode: dns.RcodeRefused},
		{name: "IXFR refused", qname: "cluster.local.", qtype: dns.TypeIXFR, rcode: dns.RcodeRefused},
		{name: "OPT as a question", qname: "cluster.local.", qtype: dns.TypeOPT, rcode: dns.RcodeFormatError},
		{name: "type 0", qname: "cluster.local.", qtype: dns.TypeNone, rcode: dns.RcodeFormatError},
		{name: "MAILB", qname: "cluster.local.", qtype: dns.TypeMAILB, rcode: dns.RcodeNotImplemented},
		{name: "relative name", qname: "kubernetes", qtype: A, rcode: dns.RcodeFormatError},
		{name: "label too long", qname: strings.Repeat("a", 64) + z, qtype: A, rcode: dns.RcodeFormatError},
	}
	for i := range cases {
		if cases[i].mode == 0 && !strings.HasPrefix(cases[i].name, "pod") {
			cases[i].mode = index.PodsVerified
		}
	}
	runCases(t, New(Config{}), cases)
}

func TestResolveAutopath(t *testing.T) {
	const A, AAAA = dns.TypeA, dns.TypeAAAA
	nxSOA := []string{"SOA cluster.local."}
	cases := []rcase{
		{name: "cross-namespace service via search path", client: dnstest.ClientIP,
			qname: "db.other.default.svc" + z, qtype: A,
			answer: []string{
				"db.other.default.svc.cluster.local. 5 IN CNAME db.other.svc.cluster.local.",
				"db.other.svc.cluster.local. 5 IN A 10.96.1.5",
			}},
		{name: "outside name: NXDOMAIN now, upstream candidates in search order", client: dnstest.ClientIP,
			qname: "Google.com.default.svc" + z, qtype: A, rcode: dns.RcodeNameError, ns: nxSOA,
			chase: &Chase{Names: []string{"google.com.corp.example.", "google.com."}, Search: true, Owner: "Google.com.default.svc" + z}},
		{name: "cluster name after outside candidates stays in the chase", client: dnstest.ClientIP,
			qname: "kubernetes.default.svc.cluster.local.default.svc" + z, qtype: A, rcode: dns.RcodeNameError, ns: nxSOA,
			chase: &Chase{Search: true, Owner: "kubernetes.default.svc.cluster.local.default.svc" + z,
				Names: []string{"kubernetes.default.svc.cluster.local.corp.example.", "kubernetes.default.svc.cluster.local."}}},
		{name: "client from another namespace", client: dnstest.OtherClientIP,
			qname: "google.com.default.svc" + z, qtype: A, rcode: dns.RcodeNameError, ns: nxSOA},
		{name: "unknown client", client: "10.9.9.9",
			qname: "google.com.default.svc" + z, qtype: A, rcode: dns.RcodeNameError, ns: nxSOA},
		{name: "no client address",
			qname: "google.com.default.svc" + z, qtype: A, rcode: dns.RcodeNameError, ns: nxSOA},
		{name: "host-network pod", client: dnstest.HostNetIP,
			qname: "google.com.default.svc" + z, qtype: A, rcode: dns.RcodeNameError, ns: nxSOA},
		{name: "pod with its own DNS config", client: "10.244.5.8",
			qname: "google.com.default.svc" + z, qtype: A, rcode: dns.RcodeNameError, ns: nxSOA},
		{name: "IP shared by pods of two namespaces", client: "10.244.5.9",
			qname: "google.com.default.svc" + z, qtype: A, rcode: dns.RcodeNameError, ns: nxSOA},
		{name: "single label is left to the client", client: dnstest.ClientIP,
			qname: "foo.default.svc" + z, qtype: A, rcode: dns.RcodeNameError, ns: nxSOA},
		{name: "existing name is answered as is", client: dnstest.ClientIP,
			qname: "kubernetes.default.svc" + z, qtype: A,
			answer: []string{"kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"}},
		{name: "candidate without that type stops the walk", client: dnstest.ClientIP,
			qname: "db.other.default.svc" + z, qtype: AAAA, rcode: dns.RcodeNameError, ns: nxSOA},
		{name: "candidate that exists without data stops the walk", client: dnstest.ClientIP,
			qname: "default.pod.default.svc" + z, qtype: A, rcode: dns.RcodeNameError, ns: nxSOA},
		{name: "candidate CNAME leaving the cluster stops the walk", client: dnstest.ClientIP,
			qname: "ext.default.default.svc" + z, qtype: A, rcode: dns.RcodeNameError, ns: nxSOA},
		{name: "not the first search domain", client: dnstest.ClientIP,
			qname: "google.com.svc" + z, qtype: A, rcode: dns.RcodeNameError, ns: nxSOA},
	}
	for i := range cases {
		cases[i].mode = index.PodsVerified
	}
	runCases(t, New(Config{Autopath: true, HostSearch: []string{"Corp.Example"}}), cases)

	t.Run("disabled", func(t *testing.T) {
		idx := fixtureIndex(t, index.PodsVerified)
		res := New(Config{}).Resolve(idx, Question{Name: "db.other.default.svc" + z, Type: A, Class: dns.ClassINET, Client: netip.MustParseAddr(dnstest.ClientIP)})
		if res.Msg.Rcode != dns.RcodeNameError || res.Chase != nil {
			t.Errorf("autopath off: got %v chase %v", res.Msg, res.Chase)
		}
	})
}

func TestResolveNotSynced(t *testing.T) {
	r := New(Config{})
	q := func(name string) Question { return Question{Name: name, Type: dns.TypeA, Class: dns.ClassINET} }
	for _, idx := range []*index.Index{
		nil,
		index.Build(index.Options{NotSynced: true}, dnstest.Fixture().Services, nil, nil),
	} {
		res := r.Resolve(idx, q("kubernetes.default.svc.cluster.local."))
		if res.Msg == nil || res.Msg.Rcode != dns.RcodeServerFailure {
			t.Errorf("index %p: cluster name before sync = %+v, want SERVFAIL", idx, res)
		}
	}
	unsynced := index.Build(index.Options{NotSynced: true, ReverseCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}}, nil, nil, nil)
	if res := r.Resolve(unsynced, q("example.com.")); !res.Forward {
		t.Errorf("outside name before sync = %+v, want forwarded", res)
	}
	if res := r.Resolve(unsynced, Question{Name: "1.0.96.10.in-addr.arpa.", Type: dns.TypePTR, Class: dns.ClassINET}); res.Msg == nil || res.Msg.Rcode != dns.RcodeServerFailure {
		t.Errorf("cluster PTR before sync = %+v, want SERVFAIL", res)
	}
}

func TestAnswerChecksMessage(t *testing.T) {
	idx := fixtureIndex(t, index.PodsDisabled)
	r := New(Config{})
	query := func(edit func(m *dns.Msg)) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion("kubernetes.default.svc.cluster.local.", dns.TypeA)
		m.Id = 4242
		edit(m)
		return m
	}
	rr, _ := dns.NewRR("x. 1 IN A 1.2.3.4")
	cases := []struct {
		name  string
		req   *dns.Msg
		rcode int
	}{
		{"ok", query(func(*dns.Msg) {}), dns.RcodeSuccess},
		{"NOTIFY", query(func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }), dns.RcodeNotImplemented},
		{"UPDATE", query(func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate }), dns.RcodeNotImplemented},
		{"STATUS", query(func(m *dns.Msg) { m.Opcode = dns.OpcodeStatus }), dns.RcodeNotImplemented},
		{"no question", query(func(m *dns.Msg) { m.Question = nil }), dns.RcodeFormatError},
		{"two questions", query(func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) }), dns.RcodeFormatError},
		{"answer in query", query(func(m *dns.Msg) { m.Answer = []dns.RR{rr} }), dns.RcodeFormatError},
		{"authority in query", query(func(m *dns.Msg) { m.Ns = []dns.RR{rr} }), dns.RcodeFormatError},
		{"a response", query(func(m *dns.Msg) { m.Response = true }), dns.RcodeFormatError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := r.Answer(idx, tc.req, netip.Addr{})
			m := res.Msg
			if m.Rcode != tc.rcode || m.Id != 4242 || !m.Response || m.Opcode != tc.req.Opcode || !m.RecursionDesired {
				t.Errorf("got rcode %s id %d QR %v opcode %d RD %v", dns.RcodeToString[m.Rcode], m.Id, m.Response, m.Opcode, m.RecursionDesired)
			}
		})
	}
}

func TestChaseComplete(t *testing.T) {
	up := func(rcode int, lines ...string) *dns.Msg {
		m := new(dns.Msg)
		m.Rcode = rcode
		for _, l := range lines {
			rr, err := dns.NewRR(l)
			if err != nil {
				t.Fatal(err)
			}
			if rr.Header().Rrtype == dns.TypeSOA {
				m.Ns = append(m.Ns, rr)
			} else {
				m.Answer = append(m.Answer, rr)
			}
		}
		return m
	}
	answers := map[string]*dns.Msg{
		"hostnames.example.com.":   up(dns.RcodeSuccess, "hostnames.example.com. 60 IN A 192.0.2.53"),
		"gone.example.com.":        up(dns.RcodeNameError, "example.com. 60 IN SOA ns. h. 1 1 1 1 30"),
		"google.com.corp.example.": up(dns.RcodeNameError),
		"google.com.":              up(dns.RcodeSuccess, "google.com. 300 IN A 192.0.2.1"),
		"nodata.corp.example.":     up(dns.RcodeSuccess, "corp.example. 60 IN SOA ns. h. 1 1 1 1 30"),
	}
	ask := func(name string) (*dns.Msg, error) {
		if m, ok := answers[name]; ok {
			return m.Copy(), nil
		}
		return nil, errDown
	}
	cname := func(owner, target string) *dns.Msg {
		m := new(dns.Msg)
		m.Authoritative = true
		m.Answer = []dns.RR{&dns.CNAME{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 5}, Target: target}}
		return m
	}
	nx := func() *dns.Msg {
		m := new(dns.Msg)
		m.Rcode = dns.RcodeNameError
		m.Authoritative = true
		return m
	}

	cases := []struct {
		name   string
		msg    *dns.Msg
		chase  Chase
		rcode  int
		answer []string
		auto   bool
	}{
		{"external target appended", cname("ext.", "hostnames.example.com."), Chase{Names: []string{"hostnames.example.com."}},
			dns.RcodeSuccess, []string{"ext. 5 IN CNAME hostnames.example.com.", "hostnames.example.com. 60 IN A 192.0.2.53"}, false},
		{"external target NXDOMAIN", cname("ext.", "gone.example.com."), Chase{Names: []string{"gone.example.com."}},
			dns.RcodeNameError, []string{"ext. 5 IN CNAME gone.example.com."}, false},
		{"upstream down keeps the CNAME", cname("ext.", "down.example.com."), Chase{Names: []string{"down.example.com."}},
			dns.RcodeSuccess, []string{"ext. 5 IN CNAME down.example.com."}, false},
		{"search: NXDOMAIN then answer", nx(), Chase{Search: true, Owner: "google.com.ns.svc.z.", TTL: 5, Names: []string{"google.com.corp.example.", "google.com."}},
			dns.RcodeSuccess, []string{"google.com.ns.svc.z. 5 IN CNAME google.com.", "google.com. 300 IN A 192.0.2.1"}, true},
		{"search: NODATA stops", nx(), Chase{Search: true, Owner: "o.", Names: []string{"nodata.corp.example.", "google.com."}},
			dns.RcodeNameError, nil, false},
		{"search: upstream down keeps NXDOMAIN", nx(), Chase{Search: true, Owner: "o.", Names: []string{"down.", "google.com."}},
			dns.RcodeNameError, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			auto := tc.chase.Complete(tc.msg, dns.TypeA, ask)
			if tc.msg.Rcode != tc.rcode || auto != tc.auto {
				t.Errorf("rcode %s autopath %v, want %s %v", dns.RcodeToString[tc.msg.Rcode], auto, dns.RcodeToString[tc.rcode], tc.auto)
			}
			if got := rrs(tc.msg.Answer); !slices.Equal(got, tc.answer) && !(len(got) == 0 && len(tc.answer) == 0) {
				t.Errorf("answer\n got %q\nwant %q", got, tc.answer)
			}
		})
	}
}

var errDown = errors.New("upstream down")

func TestRoute(t *testing.T) {
	idx := fixtureIndex(t, index.PodsDisabled)
	var asked []string
	up := func(name string) (*dns.Msg, error) {
		asked = append(asked, name)
		m := new(dns.Msg)
		m.Rcode = dns.RcodeNameError
		return m, nil
	}
	c := &Chase{Search: true, Owner: "q.", TTL: 5, Names: []string{"x.corp.example.", "Kubernetes.default.svc.cluster.local."}}
	m := new(dns.Msg)
	m.Rcode = dns.RcodeNameError
	if !c.Complete(m, dns.TypeA, Route(idx, dns.TypeA, up)) {
		t.Fatal("cluster candidate after an outside one did not answer")
	}
	want := []string{"q. 5 IN CNAME Kubernetes.default.svc.cluster.local.", "Kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"}
	if got := rrs(m.Answer); !slices.Equal(got, want) || m.Rcode != dns.RcodeSuccess {
		t.Errorf("got %s %q, want %q", dns.RcodeToString[m.Rcode], got, want)
	}
	if !slices.Equal(asked, []string{"x.corp.example."}) {
		t.Errorf("upstream asked %q, want only the outside name", asked)
	}
	if _, err := Route(idx, dns.TypeA, nil)("example.com."); err == nil {
		t.Error("outside name without upstream: want an error")
	}
}

// TestResolveForwardAll: the node-local cache's resolver sends every name
// upstream, the cluster's too, but still answers malformed questions
// itself.
func TestResolveForwardAll(t *testing.T) {
	r := New(Config{ForwardAll: true})
	idx := index.Build(index.Options{}, dnstest.Fixture().Services, nil, nil)
	cases := []struct {
		name    string
		q       Question
		forward bool
		rcode   int
	}{
		{"cluster name", Question{Name: "kubernetes.default.svc.cluster.local.", Type: dns.TypeA, Class: dns.ClassINET}, true, 0},
		{"outside name", Question{Name: "example.com.", Type: dns.TypeAAAA, Class: dns.ClassINET}, true, 0},
		{"cluster PTR", Question{Name: "1.0.96.10.in-addr.arpa.", Type: dns.TypePTR, Class: dns.ClassINET}, true, 0},
		{"zone transfer", Question{Name: "cluster.local.", Type: dns.TypeAXFR, Class: dns.ClassINET}, false, dns.RcodeRefused},
		{"chaos class", Question{Name: "version.bind.", Type: dns.TypeTXT, Class: dns.ClassCHAOS}, false, dns.RcodeRefused},
		{"OPT as a question", Question{Name: "example.com.", Type: dns.TypeOPT, Class: dns.ClassINET}, false, dns.RcodeFormatError},
	}
	for _, tc := range cases {
		for _, i := range []*index.Index{idx, nil} {
			res := r.Resolve(i, tc.q)
			if res.Forward != tc.forward || (!tc.forward && (res.Msg == nil || res.Msg.Rcode != tc.rcode)) {
				t.Errorf("%s (index %p): %+v, want forward=%v rcode %s", tc.name, i, res, tc.forward, dns.RcodeToString[tc.rcode])
			}
		}
	}
}
