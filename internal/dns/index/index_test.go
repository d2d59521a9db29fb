package index_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/internal/dns/index"
	"github.com/svcnet/svcnet/internal/svcstate"
)

func TestDashedIP(t *testing.T) {
	cases := []struct {
		ip, label string
	}{
		{"10.0.0.1", "10-0-0-1"},
		{"2001:db8::1", "2001-db8--1"},
		{"::1", "--1"},
		{"::ffff:10.0.0.1", "10-0-0-1"}, // mapped addresses are IPv4
	}
	for _, tc := range cases {
		ip := netip.MustParseAddr(tc.ip)
		if got := index.DashedIP(ip); got != tc.label {
			t.Errorf("DashedIP(%s) = %q, want %q", tc.ip, got, tc.label)
		}
		back, ok := index.ParseDashedIP(tc.label)
		if !ok || back != ip.Unmap() {
			t.Errorf("ParseDashedIP(%q) = %v %v, want %v", tc.label, back, ok, ip.Unmap())
		}
	}
	for _, bad := range []string{"", "10-0-0", "10-0-0-256", "010-0-0-1", "a-b-c-d", "fe80--1%eth0", "1-2-3-4-5-6-7-8-9", "web-0"} {
		if ip, ok := index.ParseDashedIP(bad); ok {
			t.Errorf("ParseDashedIP(%q) = %v, want failure", bad, ip)
		}
	}
}

func TestReverseName(t *testing.T) {
	cases := []struct {
		ip, name string
	}{
		{"10.96.0.1", "1.0.96.10.in-addr.arpa."},
		{"2001:db8::567:89ab", "b.a.9.8.7.6.5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa."},
	}
	for _, tc := range cases {
		ip := netip.MustParseAddr(tc.ip)
		if got := index.ReverseName(ip); got != tc.name {
			t.Errorf("ReverseName(%s) = %q, want %q", tc.ip, got, tc.name)
		}
		if want, _ := dns.ReverseAddr(tc.ip); want != tc.name {
			t.Errorf("miekg/dns disagrees: %q", want)
		}
		if got, ok := index.ParseReverseName(tc.name); !ok || got != ip {
			t.Errorf("ParseReverseName(%q) = %v %v", tc.name, got, ok)
		}
	}
	for _, bad := range []string{
		"96.10.in-addr.arpa.", "1.1.0.96.10.in-addr.arpa.", "01.0.96.10.in-addr.arpa.", "256.0.96.10.in-addr.arpa.",
		"x.0.96.10.in-addr.arpa.", ".0.96.10.in-addr.arpa.", "1.0.ip6.arpa.", "example.com.",
		"g.a.9.8.7.6.5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.",
		"ba.9.8.7.6.5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa..",
	} {
		if ip, ok := index.ParseReverseName(bad); ok {
			t.Errorf("ParseReverseName(%q) = %v, want failure", bad, ip)
		}
	}
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"Kubernetes.Default": "kubernetes.default.",
		"a.b.":               "a.b.",
		"":                   ".",
	} {
		if got := index.Canonical(in); got != want {
			t.Errorf("Canonical(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParsePodsMode(t *testing.T) {
	for _, m := range []index.PodsMode{index.PodsDisabled, index.PodsInsecure, index.PodsVerified} {
		got, err := index.ParsePodsMode(m.String())
		if err != nil || got != m {
			t.Errorf("round trip %v: %v %v", m, got, err)
		}
	}
	if _, err := index.ParsePodsMode("yes"); err == nil {
		t.Error("ParsePodsMode(yes) accepted")
	}
}

// names lists every record in the index as text, for comparing builds.
func dump(ix *index.Index, names []string) []string {
	var out []string
	for _, n := range names {
		node, ok := ix.Lookup(n)
		if !ok {
			out = append(out, n+" missing")
			continue
		}
		for _, rr := range node.All() {
			out = append(out, rr.String())
		}
	}
	return out
}

var probeNames = []string{
	"web.default.svc.cluster.local.",
	"_http._tcp.web.default.svc.cluster.local.",
	"kubernetes.default.svc.cluster.local.",
	"dual.default.svc.cluster.local.",
	"1.0.244.10.in-addr.arpa.",
	"cluster.local.",
}

func TestBuildIsDeterministic(t *testing.T) {
	c := dnstest.Fixture()
	want := dump(index.Build(index.Options{}, c.Services, c.Slices, c.Pods), probeNames)
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		svcs, sls, pods := slices.Clone(c.Services), slices.Clone(c.Slices), slices.Clone(c.Pods)
		r.Shuffle(len(svcs), func(i, j int) { svcs[i], svcs[j] = svcs[j], svcs[i] })
		r.Shuffle(len(sls), func(i, j int) { sls[i], sls[j] = sls[j], sls[i] })
		r.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
		if got := dump(index.Build(index.Options{}, svcs, sls, pods), probeNames); !slices.Equal(got, want) {
			t.Fatalf("order of input changed the zone:\n got %q\nwant %q", got, want)
		}
	}
}

func TestBuildTolerance(t *testing.T) {
	bad := dnstest.Service("default", "Not_A_Label", []string{"10.96.0.9"})
	badIP := dnstest.Service("default", "badip", []string{"not-an-ip", "10.96.0.8"})
	badExt := dnstest.ExternalName("default", "badext", "exa mple..com")
	badHost := dnstest.Headless("default", "hl", false)
	sl := dnstest.Slice("default", "hl", "hl-a", discoveryv1.AddressTypeIPv4, nil,
		dnstest.Endpoint{IP: "10.244.9.1", Hostname: "Bad_Host"}, dnstest.Endpoint{IP: "garbage"})
	fqdn := dnstest.Slice("default", "hl", "hl-b", discoveryv1.AddressTypeFQDN, nil, dnstest.Endpoint{IP: "example.com"})
	ix := index.Build(index.Options{Pods: index.PodsVerified},
		[]*corev1.Service{nil, bad, badIP, badExt, badHost}, []*discoveryv1.EndpointSlice{nil, sl, fqdn}, []*corev1.Pod{nil})

	if _, ok := ix.Lookup("not_a_label.default.svc.cluster.local."); ok {
		t.Error("service with an invalid name was published")
	}
	if n, ok := ix.Lookup("badip.default.svc.cluster.local."); !ok || len(n.RRs(dns.TypeA)) != 1 {
		t.Error("valid cluster IP next to an invalid one was not published")
	}
	if n, ok := ix.Lookup("badext.default.svc.cluster.local."); !ok || len(n.All()) != 0 {
		t.Error("invalid externalName: want the name to exist without records")
	}
	// An invalid hostname falls back to the dashed address.
	if _, ok := ix.Lookup("10-244-9-1.hl.default.svc.cluster.local."); !ok {
		t.Error("endpoint with invalid hostname has no dashed name")
	}
	if ix.Services() != 3 {
		t.Errorf("Services() = %d, want 3", ix.Services())
	}
}

func TestPodNamespace(t *testing.T) {
	c := dnstest.Fixture()
	ix := index.Build(index.Options{}, c.Services, c.Slices, c.Pods)
	cases := map[string]string{
		dnstest.ClientIP:      "default",
		dnstest.OtherClientIP: "other",
		"fd00:10::6":          "other",
		dnstest.HostNetIP:     "", // host network
		"10.244.5.7":          "", // finished
		"10.244.5.8":          "", // dnsPolicy None
		"10.244.5.9":          "", // two namespaces
		"10.1.1.1":            "",
	}
	for ip, want := range cases {
		got, ok := ix.PodNamespace(netip.MustParseAddr(ip))
		if got != want || ok != (want != "") {
			t.Errorf("PodNamespace(%s) = %q %v, want %q", ip, got, ok, want)
		}
	}
	var nilIdx *index.Index
	if _, ok := nilIdx.PodNamespace(netip.MustParseAddr(dnstest.ClientIP)); ok || nilIdx.Synced() {
		t.Error("nil index knows things")
	}
}

func TestAuthority(t *testing.T) {
	c := dnstest.Fixture()
	ix := index.Build(index.Options{Zone: "Example.Internal.", ReverseCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}}, c.Services, c.Slices, c.Pods)
	if ix.Zone() != "example.internal." {
		t.Fatalf("Zone() = %q", ix.Zone())
	}
	cases := map[string]index.Authority{
		"example.internal.":                        index.Zone,
		"kubernetes.default.svc.example.internal.": index.Zone,
		"internal.":                index.NotAuthoritative,
		"xexample.internal.":       index.NotAuthoritative,
		"cluster.local.":           index.NotAuthoritative,
		"1.0.96.10.in-addr.arpa.":  index.Reverse, // known and in range
		"1.0.244.10.in-addr.arpa.": index.Reverse, // known (headless endpoint), out of range
		"9.9.244.10.in-addr.arpa.": index.NotAuthoritative,
		"9.9.100.10.in-addr.arpa.": index.Reverse, // unknown, in range
		"96.10.in-addr.arpa.":      index.NotAuthoritative,
	}
	for name, want := range cases {
		if got := ix.Authority(name); got != want {
			t.Errorf("Authority(%q) = %v, want %v", name, got, want)
		}
	}
}

// benchServices are n ClusterIP Services over 20 namespaces, with a
// slice of 10 endpoints each (which ClusterIP Services do not publish, so
// they cost the zone nothing).
func benchServices(n int) ([]*corev1.Service, []*discoveryv1.EndpointSlice) {
	var svcs []*corev1.Service
	var sls []*discoveryv1.EndpointSlice
	for i := range n {
		ns := "ns" + string(rune('a'+i%20))
		name := "svc-" + strconv.Itoa(i)
		ip := netip.AddrFrom4([4]byte{10, byte(96 + i>>16), byte(i >> 8), byte(i)}).String()
		svcs = append(svcs, dnstest.Service(ns, name, []string{ip}, dnstest.Port("http", corev1.ProtocolTCP, 80)))
		var eps []dnstest.Endpoint
		for j := range 10 {
			eps = append(eps, dnstest.Endpoint{IP: netip.AddrFrom4([4]byte{10, byte(100 + j), byte(i >> 8), byte(i)}).String()})
		}
		sls = append(sls, dnstest.Slice(ns, name, name+"-x", discoveryv1.AddressTypeIPv4, nil, eps...))
	}
	return svcs, sls
}

func BenchmarkBuild10k(b *testing.B) {
	svcs, sls := benchServices(10000)
	b.ReportAllocs()
	for b.Loop() {
		index.Build(index.Options{}, svcs, sls, nil)
	}
}

// BenchmarkUpdaterNewService: one new Service in a zone of n, published
// as a new snapshot — what a change costs the DNS before it answers it.
// Also reports the zone's heap per Service.
//
//	go test ./internal/dns/index -run '^$' -bench UpdaterNewService
func BenchmarkUpdaterNewService(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			svcs, _ := benchServices(n + 1)
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			u := index.NewUpdater(index.Options{})
			for _, s := range svcs[:n] {
				u.SetService(s.Namespace, s.Name, s, nil)
			}
			ix := u.Snapshot(1)
			runtime.GC()
			runtime.ReadMemStats(&after)
			perService := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
			extra := svcs[n]
			serial := uint32(2)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				// Add it and take it away again, so every iteration is one
				// new Service in a zone of n.
				u.SetService(extra.Namespace, extra.Name, extra, nil)
				ix = u.Snapshot(serial)
				u.SetService(extra.Namespace, extra.Name, nil, nil)
				serial++
			}
			if _, ok := ix.Lookup(extra.Name + "." + extra.Namespace + ".svc.cluster.local."); !ok {
				b.Fatal("the new Service is not in the snapshot")
			}
			b.ReportMetric(perService, "zone-bytes/service")
		})
	}
}

// TestEndpointsAsTheProxy: the DNS publishes the endpoints the proxy
// modes reach, read by the same rules (svcstate.ReadSlice): an address
// of the other family, a special or malformed one, a repeated one and
// an unready one (without publishNotReadyAddresses) are left out of both.
func TestEndpointsAsTheProxy(t *testing.T) {
	svc := dnstest.Headless("default", "hl", false)
	sl := dnstest.Slice("default", "hl", "hl-a", discoveryv1.AddressTypeIPv4, nil,
		dnstest.Endpoint{IP: "10.244.1.1"},
		dnstest.Endpoint{IP: "2001:db8::1"}, // the other family
		dnstest.Endpoint{IP: "127.0.0.1"},   // loopback
		dnstest.Endpoint{IP: "10.244.1.x"},  // malformed
		dnstest.Endpoint{IP: "10.244.1.1"},  // repeated
		dnstest.Endpoint{IP: "10.244.1.2", NotReady: true},
		dnstest.Endpoint{IP: "10.244.1.3"})
	ix := index.Build(index.Options{}, []*corev1.Service{svc}, []*discoveryv1.EndpointSlice{sl}, nil)
	n, ok := ix.Lookup("hl.default.svc.cluster.local.")
	if !ok {
		t.Fatal("the headless Service has no name")
	}
	var dnsAddrs []string
	for _, rr := range n.RRs(dns.TypeA) {
		dnsAddrs = append(dnsAddrs, rr.(*dns.A).A.String())
	}
	slices.Sort(dnsAddrs)

	_, eps, ok := svcstate.ReadSlice(sl, nil)
	if !ok {
		t.Fatal("svcstate reads nothing of the slice")
	}
	var proxyAddrs []string
	for _, e := range eps {
		if e.Ready {
			proxyAddrs = append(proxyAddrs, e.IP.String())
		}
	}
	slices.Sort(proxyAddrs)
	want := []string{"10.244.1.1", "10.244.1.3"}
	if !slices.Equal(dnsAddrs, want) || !slices.Equal(proxyAddrs, want) {
		t.Errorf("DNS publishes %v, the proxy reads %v; want both %v", dnsAddrs, proxyAddrs, want)
	}
}
