package dns_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// CoreDNSEnv names the CoreDNS binary the differential test runs; make
// test builds it (hack/coredns.sh) into the default path.
const (
	CoreDNSEnv     = "SVCNET_COREDNS"
	defaultCoreDNS = "/var/cache/svcnet/coredns/v1.14.7/coredns"
)

// knownDifferences are the questions CoreDNS 1.14.7 and svcnet dns
// answer differently, on purpose, and why (docs/architecture.md lists
// them for users). The test fails on any other difference, and on any of
// these that is gone, so the list stays true.
var knownDifferences = []struct {
	why       string
	questions []string
}{
	{"svcnet publishes the endpoints of a publishNotReadyAddresses Service even when its slices mark them not ready; CoreDNS relies on the EndpointSlice controller, which marks them ready for such Services",
		[]string{"pnr.default.svc.cluster.local. A", "pnr.default.svc.cluster.local. AAAA", "pnr.default.svc.cluster.local. SRV",
			"pnr.default.svc.cluster.local. TXT", "pnr.default.svc.cluster.local. MX", "pnr.default.svc.cluster.local. CNAME",
			"pnr.default.svc.cluster.local. PTR", "pnr.default.svc.cluster.local. NS", "pnr-0.pnr.default.svc.cluster.local. A",
			"pnr-0.pnr.default.svc.cluster.local. AAAA", "pnr-0.pnr.default.svc.cluster.local. TXT",
			"_http._tcp.pnr.default.svc.cluster.local. SRV", "_http._tcp.pnr.default.svc.cluster.local. A",
			"10.3.244.10.in-addr.arpa. PTR", "10.3.244.10.in-addr.arpa. A"}},
	{"a name that does not exist is NXDOMAIN for every type (RFC 1034); CoreDNS answers SOA questions for it with NODATA",
		[]string{"empty.default.svc.cluster.local. SOA", "web.other.svc.cluster.local. SOA", "nope.default.svc.cluster.local. SOA",
			"web.nope.svc.cluster.local. SOA"}},
	{"an ExternalName's CNAME answers every type (RFC 1034 3.6.2); CoreDNS gives it only for A, AAAA and CNAME questions",
		[]string{"ext.default.svc.cluster.local. SRV", "ext.default.svc.cluster.local. TXT", "ext.default.svc.cluster.local. MX",
			"ext.default.svc.cluster.local. PTR", "ext.default.svc.cluster.local. NS", "ext.default.svc.cluster.local. SOA",
			"alias.default.svc.cluster.local. AAAA", "alias.default.svc.cluster.local. SRV", "alias.default.svc.cluster.local. TXT",
			"alias.default.svc.cluster.local. MX", "alias.default.svc.cluster.local. PTR", "alias.default.svc.cluster.local. NS",
			"alias.default.svc.cluster.local. SOA"}},
	{"a name that exists answers a type it lacks with NODATA (RFC 2308); CoreDNS answers NXDOMAIN for types it does not serve there",
		[]string{"default.svc.cluster.local. TXT", "svc.cluster.local. TXT", "cluster.local. TXT", "ns.dns.cluster.local. TXT",
			"dns-version.cluster.local. A", "dns-version.cluster.local. AAAA", "default.pod.cluster.local. TXT", "pod.cluster.local. TXT",
			"20.0.96.10.in-addr.arpa. A", "10.0.96.10.in-addr.arpa. A", "10.1.244.10.in-addr.arpa. A", "11.1.244.10.in-addr.arpa. A",
			"10.2.244.10.in-addr.arpa. A", "11.2.244.10.in-addr.arpa. A"}},
	{"an empty non-terminal above SRV names exists (RFC 8020: NODATA); CoreDNS answers NXDOMAIN",
		[]string{"_tcp.web.default.svc.cluster.local. SRV", "_tcp.web.default.svc.cluster.local. A"}},
	{"ns.dns.<zone> is the kube-dns Service's ClusterIP; CoreDNS gives its own pod's address, which a CoreDNS outside a pod does not have",
		[]string{"ns.dns.cluster.local. A"}},
	{"with --pods insecure svcnet answers a dashed address in any namespace, as kube-dns did; CoreDNS only in namespaces that exist",
		[]string{"10-244-5-5.nope.pod.cluster.local. A", "10-244-5-5.nope.pod.cluster.local. AAAA", "10-244-5-5.nope.pod.cluster.local. TXT"}},
}

// TestCoreDNSDifferential runs CoreDNS (as kubeadm configures it, without
// the cache) and `svcnet dns` on one API server
// with the same objects and upstream, asks both every question of a
// generated set — every record kind, wrong types, case, names under
// and beside the real ones, unknown namespaces, wildcard-like names,
// ports and protocols in SRV, reverse names — and compares the rcode,
// the answer records and the kind of authority records.
func TestCoreDNSDifferential(t *testing.T) {
	bin := os.Getenv(CoreDNSEnv)
	if bin == "" {
		bin = defaultCoreDNS
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("CoreDNS binary %s: %v (make test builds it: hack/coredns.sh %s)", bin, err, defaultCoreDNS)
	}
	api := framework.StartAPIServer(t)
	questions := differentialFixtures(t, api)
	up := dnstest.StartUpstream(t)
	up.Add(t, "www.example.org. 30 IN A 192.0.2.80", "www.example.org. 30 IN AAAA 2001:db8::80")

	d := startDNS(t, api, up.Addr, "--pods", "insecure")
	// kubeadm's configuration without the cache (each question is asked
	// once; TTLs and record order are not compared).
	cd := startCoreDNSConf(t, bin, "", api.KubeconfigOf("dns"), up.Addr, false).addr
	// Both have synced once the last object is answered.
	for _, addr := range []string{d.Addr, cd} {
		until(t, "both servers to answer the fixtures", 30*time.Second, func() bool {
			m, err := ask(addr, "db-0.db.default.svc.cluster.local.", time.Second)
			return err == nil && len(m.Answer) == 1
		})
	}

	differences := map[string]string{}
	for _, d := range knownDifferences {
		for _, q := range d.questions {
			differences[q] = d.why
		}
	}
	seen := map[string]bool{}
	for _, q := range questions {
		key := q.name + " " + dns.TypeToString[q.qtype]
		ours, err1 := askType(d.Addr, q.name, q.qtype)
		theirs, err2 := askType(cd, q.name, q.qtype)
		if err1 != nil || err2 != nil {
			t.Errorf("%s: svcnet %v, CoreDNS %v", key, err1, err2)
			continue
		}
		a, b := digest(ours), digest(theirs)
		why, known := differences[key]
		switch {
		case a != b && !known:
			t.Errorf("%s:\n  svcnet:  %s\n  CoreDNS: %s", key, a, b)
		case a == b && known:
			t.Errorf("%s: listed as a difference (%s), but both answer %s", key, why, a)
		}
		seen[key] = true
	}
	for key := range differences {
		if !seen[key] {
			t.Errorf("difference %q is not asked any more", key)
		}
	}
	t.Logf("%d questions compared, %d documented differences", len(questions), len(differences))
}

type question struct {
	name  string
	qtype uint16
}

func askType(addr, name string, qtype uint16) (*dns.Msg, error) {
	req := new(dns.Msg)
	req.SetQuestion(name, qtype)
	req.SetEdns0(1232, false)
	c := &dns.Client{Net: "udp", Timeout: 3 * time.Second}
	m, _, err := c.Exchange(req, addr)
	return m, err
}

// digest is what the comparison looks at: rcode, the answer records
// (names lower-cased, TTLs dropped, sorted) and the types of the
// authority records.
func digest(m *dns.Msg) string {
	var ans []string
	for _, rr := range m.Answer {
		rr = dns.Copy(rr)
		rr.Header().Ttl = 0
		rr.Header().Name = strings.ToLower(rr.Header().Name)
		ans = append(ans, strings.Join(strings.Fields(rr.String()), " "))
	}
	slices.Sort(ans)
	var ns []string
	for _, rr := range m.Ns {
		ns = append(ns, dns.TypeToString[rr.Header().Rrtype])
	}
	slices.Sort(ns)
	return fmt.Sprintf("%s answer=[%s] authority=[%s]", dns.RcodeToString[m.Rcode], strings.Join(ans, "; "), strings.Join(ns, " "))
}

// differentialFixtures creates one object of each shape on api and
// returns the questions to ask about them.
func differentialFixtures(t *testing.T, api *framework.APIServer) []question {
	t.Helper()
	c := api.Client()
	ctx := framework.Context(t, time.Minute)
	for _, ns := range []string{"other"} {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	svc := func(ns, name, clusterIP string, mut func(*corev1.Service), ports ...corev1.ServicePort) {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ClusterIP: clusterIP, Ports: ports}}
		if mut != nil {
			mut(s)
		}
		if _, err := c.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	port := func(name string, proto corev1.Protocol, p int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Protocol: proto, Port: p, TargetPort: intstr.FromInt32(p)}
	}
	slice := func(ns, svc string, ports []discoveryv1.EndpointPort, eps ...dnstest.Endpoint) {
		sl := dnstest.Slice(ns, svc, svc+"-abc", discoveryv1.AddressTypeIPv4, ports, eps...)
		if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, sl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc("kube-system", "kube-dns", "10.96.0.10", nil, port("dns", udp, 53), port("dns-tcp", tcp, 53))
	svc("default", "web", "10.96.0.20", nil, port("http", tcp, 80), port("dns", udp, 53))
	slice("default", "web", []discoveryv1.EndpointPort{dnstest.SlicePort("http", tcp, 8080), dnstest.SlicePort("dns", udp, 5353)},
		dnstest.Endpoint{IP: "10.244.1.10"}, dnstest.Endpoint{IP: "10.244.1.11", Hostname: "web-1"}, dnstest.Endpoint{IP: "10.244.1.12", NotReady: true})
	svc("default", "single", "10.96.0.21", nil, corev1.ServicePort{Protocol: tcp, Port: 8080, TargetPort: intstr.FromInt32(8080)})
	svc("default", "db", corev1.ClusterIPNone, nil, port("pg", tcp, 5432))
	slice("default", "db", []discoveryv1.EndpointPort{dnstest.SlicePort("pg", tcp, 5432)},
		dnstest.Endpoint{IP: "10.244.2.10", Hostname: "db-0"}, dnstest.Endpoint{IP: "10.244.2.11"}, dnstest.Endpoint{IP: "10.244.2.12", Hostname: "db-2", NotReady: true})
	svc("default", "pnr", corev1.ClusterIPNone, func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }, port("http", tcp, 80))
	slice("default", "pnr", []discoveryv1.EndpointPort{dnstest.SlicePort("http", tcp, 80)},
		dnstest.Endpoint{IP: "10.244.3.10", Hostname: "pnr-0", NotReady: true})
	svc("default", "empty", corev1.ClusterIPNone, nil, port("http", tcp, 80))
	svc("default", "ext", "", func(s *corev1.Service) {
		s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "www.example.org"
	})
	svc("default", "alias", "", func(s *corev1.Service) {
		s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "web.default.svc.cluster.local"
	})
	svc("other", "multi", "10.96.0.30", nil, port("https", tcp, 443), port("metrics", tcp, 9090))
	pod := dnstest.Pod("default", "client", "10.244.5.5")
	if _, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: pod.ObjectMeta,
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var qs []question
	add := func(name string, types ...uint16) {
		for _, ty := range types {
			qs = append(qs, question{name, ty})
		}
	}
	all := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeTXT, dns.TypeMX, dns.TypeCNAME, dns.TypePTR, dns.TypeNS, dns.TypeSOA}
	for _, n := range []string{
		"web.default", "single.default", "db.default", "pnr.default", "empty.default", "ext.default", "alias.default",
		"multi.other", "web.other", "nope.default", "web.nope", "kube-dns.kube-system",
	} {
		add(n+".svc.cluster.local.", all...)
	}
	for _, n := range []string{
		"WEB.Default.svc.cluster.local.", "web.default.svc.cluster.local.cluster.local.", "x.web.default.svc.cluster.local.",
		"web-1.web.default.svc.cluster.local.", "10-244-1-10.web.default.svc.cluster.local.",
		"db-0.db.default.svc.cluster.local.", "10-244-2-11.db.default.svc.cluster.local.", "db-2.db.default.svc.cluster.local.",
		"x.db-0.db.default.svc.cluster.local.", "pnr-0.pnr.default.svc.cluster.local.",
		"default.svc.cluster.local.", "nope.svc.cluster.local.", "svc.cluster.local.", "cluster.local.",
		"ns.dns.cluster.local.", "dns-version.cluster.local.", "nope.cluster.local.",
		"*.default.svc.cluster.local.", "any.default.svc.cluster.local.", "*.*.svc.cluster.local.",
		"10-244-5-5.default.pod.cluster.local.", "10-244-5-5.nope.pod.cluster.local.", "10.244.5.5.default.pod.cluster.local.",
		"default.pod.cluster.local.", "pod.cluster.local.", "www.example.org.",
	} {
		add(n, dns.TypeA, dns.TypeAAAA, dns.TypeTXT)
	}
	for _, n := range []string{
		"_http._tcp.web.default", "_dns._udp.web.default", "_dns._tcp.web.default", "_http._udp.web.default",
		"_HTTP._TCP.web.default", "_tcp.web.default", "_pg._tcp.db.default", "_nope._tcp.db.default", "_http._tcp.pnr.default",
		"_https._tcp.multi.other", "_http._tcp.empty.default", "_http._tcp.ext.default", "*._tcp.web.default", "_http.*.web.default",
	} {
		add(n+".svc.cluster.local.", dns.TypeSRV, dns.TypeA)
	}
	for _, ip := range []string{"10.96.0.20", "10.96.0.10", "10.244.1.10", "10.244.1.11", "10.244.1.12", "10.244.2.10", "10.244.2.11",
		"10.244.2.12", "10.244.3.10", "10.244.5.5", "10.96.0.99"} {
		r, _ := dns.ReverseAddr(ip)
		add(r, dns.TypePTR, dns.TypeA)
	}
	add("96.10.in-addr.arpa.", dns.TypePTR)
	return qs
}
