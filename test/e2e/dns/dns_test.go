// Package dns_test runs `svcnet dns` against svcnet's API server and asks
// it with a real DNS client (miekg/dns), on loopback only: the upstream
// is a fake on 127.0.0.1, and the machine's resolver is never read.
package dns_test

import (
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

func TestDNS(t *testing.T) {
	e := startEnv(t, "--pods", "verified", "--autopath")
	e.upstream.Add(t,
		"hostnames.example.com. 30 IN A 192.0.2.80",
		"external.example.org. 30 IN A 192.0.2.1",
		"external.example.org. 30 IN AAAA 2001:db8::1",
	)
	t.Run("new Service resolves within a second", func(t *testing.T) { testNewService(t, e) })
	t.Run("records of a ClusterIP Service", func(t *testing.T) { testClusterIPRecords(t, e) })
	t.Run("headless Service follows pod readiness", func(t *testing.T) { testHeadlessPods(t, e) })
	t.Run("headless Service with hand-written slices", func(t *testing.T) { testHeadlessManual(t, e) })
	t.Run("ExternalName is a CNAME", func(t *testing.T) { testExternalName(t, e) })
	t.Run("outside names go upstream, through the cache", func(t *testing.T) { testForward(t, e) })
	t.Run("autopath answers a pod's search expansion", func(t *testing.T) { testAutopath(t, e) })
	t.Run("metrics and probes", func(t *testing.T) { testHTTP(t, e) })
}

func testNewService(t *testing.T, e *env) {
	ctx := e.ctx(t)
	for i := range 5 {
		name := "fresh-" + string(rune('a'+i))
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		start := time.Now()
		created, err := e.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fqdn := name + ".default.svc.cluster.local."
		var m *dns.Msg
		for {
			m = e.dns.query(t, "udp", fqdn, dns.TypeA)
			if slices.Equal(addrs(m), []string{created.Spec.ClusterIP}) {
				break
			}
			if time.Since(start) > time.Second {
				t.Fatalf("%s not answered within a second of its creation: %s", fqdn, summary(m))
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("%s resolved %s after creation", name, time.Since(start).Round(time.Millisecond))
	}

	// A deleted Service goes as fast.
	if err := e.client.CoreV1().Services("default").Delete(ctx, "fresh-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "fresh-a to be NXDOMAIN", time.Second, func() bool {
		return e.dns.query(t, "udp", "fresh-a.default.svc.cluster.local.", dns.TypeA).Rcode == dns.RcodeNameError
	})
}

func testClusterIPRecords(t *testing.T, e *env) {
	ctx := e.ctx(t)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hostnames"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "hostnames"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(9376)}}}}
	created, err := e.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip := created.Spec.ClusterIP
	until(t, "hostnames to resolve", 5*time.Second, func() bool {
		return len(addrs(e.dns.query(t, "udp", "hostnames.default.svc.cluster.local.", dns.TypeA))) == 1
	})
	reverse, _ := dns.ReverseAddr(ip)

	cases := []struct {
		name   string
		qname  string
		qtype  uint16
		rcode  int
		answer []string // record data, in order
		soa    bool     // SOA in the authority section (denials)
	}{
		{"A", "hostnames.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{ip}, false},
		{"any case", "HostNames.Default.SVC.cluster.LOCAL.", dns.TypeA, dns.RcodeSuccess, []string{ip}, false},
		{"NODATA for AAAA", "hostnames.default.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, nil, true},
		{"SRV of a named port", "_http._tcp.hostnames.default.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"0 100 80 hostnames.default.svc.cluster.local."}, false},
		{"no SRV for another protocol", "_http._udp.hostnames.default.svc.cluster.local.", dns.TypeSRV, dns.RcodeNameError, nil, true},
		{"PTR of the ClusterIP", reverse, dns.TypePTR, dns.RcodeSuccess, []string{"hostnames.default.svc.cluster.local."}, false},
		{"PTR of an unused service address", "254.255.111.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError, nil, true},
		{"NXDOMAIN", "nope.default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil, true},
		{"namespace exists", "default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, nil, true},
		{"kubernetes", "kubernetes.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.96.0.1"}, false},
		{"schema version", "dns-version.cluster.local.", dns.TypeTXT, dns.RcodeSuccess, []string{`"1.1.0"`}, false},
		{"nameserver is kube-dns", "ns.dns.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{kubeDNSIP}, false},
	}
	for _, proto := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			t.Run(proto+"/"+tc.name, func(t *testing.T) {
				m := e.dns.query(t, proto, tc.qname, tc.qtype)
				var got []string
				for _, rr := range m.Answer {
					got = append(got, strings.TrimPrefix(rr.String(), rr.Header().String()))
				}
				if m.Rcode != tc.rcode || !slices.Equal(got, tc.answer) || !m.Authoritative {
					t.Errorf("got %s, want %s %q authoritative", summary(m), dns.RcodeToString[tc.rcode], tc.answer)
				}
				if hasSOA := len(m.Ns) == 1 && m.Ns[0].Header().Rrtype == dns.TypeSOA; hasSOA != tc.soa {
					t.Errorf("authority section %v, want SOA: %v", m.Ns, tc.soa)
				}
				if len(m.Answer) > 0 && m.Answer[0].Header().Name != tc.qname {
					t.Errorf("owner %q, want the name as asked %q", m.Answer[0].Header().Name, tc.qname)
				}
			})
		}
	}
}

func testHeadlessPods(t *testing.T, e *env) {
	ctx := e.ctx(t)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}}
	if _, err := e.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	names := []string{"web-0", "web-1", "web-2"}
	for _, n := range names {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Hostname: n, Subdomain: "web", Containers: []corev1.Container{{Name: "c", Image: "svcnet/hostnames",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}}
		if _, err := e.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	podIP := map[string]string{}
	until(t, "pods running with addresses", 30*time.Second, func() bool {
		for _, n := range names {
			p, err := e.client.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{})
			if err != nil || p.Status.PodIP == "" {
				return false
			}
			podIP[n] = p.Status.PodIP
		}
		return true
	})
	ipsOf := func(ns ...string) []string {
		var out []string
		for _, n := range ns {
			out = append(out, podIP[n])
		}
		slices.Sort(out)
		return out
	}
	const name = "web.default.svc.cluster.local."
	waitAddrs := func(what string, want []string) {
		t.Helper()
		var last *dns.Msg
		until(t, what, 30*time.Second, func() bool {
			last = e.dns.query(t, "udp", name, dns.TypeA)
			return slices.Equal(addrs(last), want)
		})
	}
	waitAddrs("all three ready pods", ipsOf("web-0", "web-1", "web-2"))

	if got := addrs(e.dns.query(t, "udp", "web-1.web.default.svc.cluster.local.", dns.TypeA)); !slices.Equal(got, ipsOf("web-1")) {
		t.Errorf("web-1.web: %v, want %v", got, ipsOf("web-1"))
	}
	srv := e.dns.query(t, "udp", "_http._tcp.web.default.svc.cluster.local.", dns.TypeSRV)
	var targets []string
	for _, rr := range srv.Answer {
		s := rr.(*dns.SRV)
		if s.Port != 8080 {
			t.Errorf("SRV port %d, want the endpoint's 8080", s.Port)
		}
		targets = append(targets, s.Target)
	}
	slices.Sort(targets)
	if want := []string{"web-0.web.default.svc.cluster.local.", "web-1.web.default.svc.cluster.local.", "web-2.web.default.svc.cluster.local."}; !slices.Equal(targets, want) {
		t.Errorf("SRV targets %v, want %v", targets, want)
	}
	if len(srv.Extra) < 3 {
		t.Errorf("SRV answer has %d additional records, want the targets' addresses", len(srv.Extra))
	}
	reverse, _ := dns.ReverseAddr(podIP["web-2"])
	if m := e.dns.query(t, "udp", reverse, dns.TypePTR); len(m.Answer) != 1 || m.Answer[0].(*dns.PTR).Ptr != "web-2.web.default.svc.cluster.local." {
		t.Errorf("PTR of web-2: %s", summary(m))
	}
	podName := strings.ReplaceAll(podIP["web-0"], ".", "-") + ".default.pod.cluster.local."
	if got := addrs(e.dns.query(t, "udp", podName, dns.TypeA)); !slices.Equal(got, ipsOf("web-0")) {
		t.Errorf("pod record %s: %v (verified mode, the pod exists)", podName, got)
	}
	if m := e.dns.query(t, "udp", strings.ReplaceAll(podIP["web-0"], ".", "-")+".kube-system.pod.cluster.local.", dns.TypeA); m.Rcode != dns.RcodeNameError {
		t.Errorf("pod record in a namespace without that pod: %s, want NXDOMAIN (verified mode)", summary(m))
	}

	if err := e.kubelet.SetReady(ctx, "default", "web-1", false); err != nil {
		t.Fatal(err)
	}
	waitAddrs("web-1 to leave when unready", ipsOf("web-0", "web-2"))
	if m := e.dns.query(t, "udp", "web-1.web.default.svc.cluster.local.", dns.TypeA); m.Rcode != dns.RcodeNameError {
		t.Errorf("web-1.web while unready: %s, want NXDOMAIN", summary(m))
	}
	if err := e.kubelet.SetReady(ctx, "default", "web-1", true); err != nil {
		t.Fatal(err)
	}
	waitAddrs("web-1 to come back when ready", ipsOf("web-0", "web-1", "web-2"))
	if err := e.client.CoreV1().Pods("default").Delete(ctx, "web-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAddrs("web-2 to leave when deleted", ipsOf("web-0", "web-1"))

	for _, n := range []string{"web-0", "web-1"} {
		if err := e.kubelet.SetReady(ctx, "default", n, false); err != nil {
			t.Fatal(err)
		}
	}
	until(t, "NXDOMAIN once no endpoint is ready", 30*time.Second, func() bool {
		return e.dns.query(t, "udp", name, dns.TypeA).Rcode == dns.RcodeNameError
	})
}

// testHeadlessManual writes the EndpointSlices itself, as an operator of
// a selector-less Service does, including publishNotReadyAddresses.
func testHeadlessManual(t *testing.T, e *env) {
	ctx := e.ctx(t)
	for _, svc := range []*corev1.Service{dnstest.Headless("default", "manual", false), dnstest.Headless("default", "warm", true)} {
		svc.Spec.ClusterIPs = nil
		if _, err := e.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tcp := corev1.ProtocolTCP
	ports := []discoveryv1.EndpointPort{dnstest.SlicePort("db", tcp, 5432)}
	manual := dnstest.Slice("default", "manual", "manual-1", discoveryv1.AddressTypeIPv4, ports,
		dnstest.Endpoint{IP: "10.100.9.1", Hostname: "db-0"}, dnstest.Endpoint{IP: "10.100.9.2", NotReady: true})
	warm := dnstest.Slice("default", "warm", "warm-1", discoveryv1.AddressTypeIPv4, nil, dnstest.Endpoint{IP: "10.100.9.3", NotReady: true})
	for _, sl := range []*discoveryv1.EndpointSlice{manual, warm} {
		if _, err := e.client.DiscoveryV1().EndpointSlices("default").Create(ctx, sl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	until(t, "the ready endpoint only", 10*time.Second, func() bool {
		return slices.Equal(addrs(e.dns.query(t, "udp", "manual.default.svc.cluster.local.", dns.TypeA)), []string{"10.100.9.1"})
	})
	if got := addrs(e.dns.query(t, "tcp", "db-0.manual.default.svc.cluster.local.", dns.TypeA)); !slices.Equal(got, []string{"10.100.9.1"}) {
		t.Errorf("db-0.manual: %v", got)
	}
	until(t, "publishNotReadyAddresses to publish the unready endpoint", 10*time.Second, func() bool {
		return slices.Equal(addrs(e.dns.query(t, "udp", "warm.default.svc.cluster.local.", dns.TypeA)), []string{"10.100.9.3"})
	})

	manual.Endpoints[1].Conditions.Ready = ptr.To(true)
	if _, err := e.client.DiscoveryV1().EndpointSlices("default").Update(ctx, manual, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "both endpoints once ready", 10*time.Second, func() bool {
		return slices.Equal(addrs(e.dns.query(t, "udp", "manual.default.svc.cluster.local.", dns.TypeA)), []string{"10.100.9.1", "10.100.9.2"})
	})
	srv := e.dns.query(t, "udp", "_db._tcp.manual.default.svc.cluster.local.", dns.TypeSRV)
	if len(srv.Answer) != 2 {
		t.Errorf("SRV: %s, want one per endpoint", summary(srv))
	}
}

func testExternalName(t *testing.T, e *env) {
	ctx := e.ctx(t)
	if _, err := e.client.CoreV1().Services("default").Create(ctx,
		dnstest.ExternalName("default", "ext", "hostnames.example.com"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var m *dns.Msg
	until(t, "the ExternalName CNAME", 5*time.Second, func() bool {
		m = e.dns.query(t, "udp", "ext.default.svc.cluster.local.", dns.TypeA)
		return len(m.Answer) > 0
	})
	if len(m.Answer) != 2 || m.Answer[0].(*dns.CNAME).Target != "hostnames.example.com." || !slices.Equal(addrs(m), []string{"192.0.2.80"}) {
		t.Errorf("A ext: %s, want the CNAME and the target's address from upstream", summary(m))
	}
	m = e.dns.query(t, "udp", "ext.default.svc.cluster.local.", dns.TypeCNAME)
	if len(m.Answer) != 1 || m.Answer[0].Header().Rrtype != dns.TypeCNAME || !m.Authoritative {
		t.Errorf("CNAME ext: %s, want the CNAME alone, authoritative", summary(m))
	}
}

func testForward(t *testing.T, e *env) {
	m := e.dns.query(t, "udp", "External.Example.org.", dns.TypeA)
	if m.Rcode != dns.RcodeSuccess || !slices.Equal(addrs(m), []string{"192.0.2.1"}) || m.Authoritative {
		t.Errorf("outside name: %s, want the upstream's answer, not authoritative", summary(m))
	}
	asked := e.upstream.QueriesFor("external.example.org.")
	for range 5 {
		e.dns.query(t, "udp", "external.example.org.", dns.TypeA)
	}
	if now := e.upstream.QueriesFor("external.example.org."); now != asked {
		t.Errorf("upstream asked %d more times for a cached name", now-asked)
	}
	if m := e.dns.query(t, "tcp", "external.example.org.", dns.TypeAAAA); !slices.Equal(addrs(m), []string{"2001:db8::1"}) {
		t.Errorf("AAAA over TCP: %s", summary(m))
	}
	if m := e.dns.query(t, "udp", "missing.example.org.", dns.TypeA); m.Rcode != dns.RcodeNameError {
		t.Errorf("upstream NXDOMAIN: %s", summary(m))
	}
	// A PTR in the cluster's ranges is never the upstream's business.
	before := e.upstream.Queries()
	if m := e.dns.query(t, "udp", "7.7.100.10.in-addr.arpa.", dns.TypePTR); m.Rcode != dns.RcodeNameError || !m.Authoritative {
		t.Errorf("PTR of an unused pod address: %s, want our NXDOMAIN", summary(m))
	}
	if e.upstream.Queries() != before {
		t.Error("a PTR question in the pod range was forwarded")
	}
}

// testAutopath registers a pod at 127.0.0.1, the address these queries
// come from, so the server knows the asker's namespace and search path.
func testAutopath(t *testing.T, e *env) {
	ctx := e.ctx(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "asker"},
		Spec: corev1.PodSpec{NodeName: "not-a-hollow-node", Containers: []corev1.Container{{Name: "c", Image: "svcnet/client"}}}}
	created, err := e.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}}}
	if _, err := e.client.CoreV1().Pods("default").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	const q = "external.example.org.default.svc.cluster.local."
	var m *dns.Msg
	until(t, "autopath to know the asking pod", 10*time.Second, func() bool {
		m = e.dns.query(t, "udp", q, dns.TypeA)
		return m.Rcode == dns.RcodeSuccess
	})
	if len(m.Answer) != 2 || m.Answer[0].(*dns.CNAME).Target != "external.example.org." || !slices.Equal(addrs(m), []string{"192.0.2.1"}) {
		t.Errorf("autopath: %s, want a CNAME to external.example.org and its address", summary(m))
	}
	// The second search expansion is not the first one a pod in default
	// would send, so it is answered as is.
	if m := e.dns.query(t, "udp", "external.example.org.svc.cluster.local.", dns.TypeA); m.Rcode != dns.RcodeNameError {
		t.Errorf("non-first expansion: %s, want NXDOMAIN", summary(m))
	}
}

func testHTTP(t *testing.T, e *env) {
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := e.dns.get(t, path); code != http.StatusOK {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
	code, body := e.dns.get(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	m, err := framework.ParseMetrics(body)
	if err != nil {
		t.Fatal(err)
	}
	positive := func(v float64) bool { return v > 0 }
	for _, w := range []struct {
		name   string
		labels []string
		check  func(float64) bool
		want   string
	}{
		{"svcnet_dns_zone_synced", nil, func(v float64) bool { return v == 1 }, "1"},
		{"svcnet_dns_requests_total", []string{"proto", "udp", "type", "A"}, positive, "> 0"},
		{"svcnet_dns_responses_total", []string{"rcode", "NXDOMAIN", "source", "zone", "type", "A"}, positive, "> 0"},
		{"svcnet_dns_forward_upstream_healthy", []string{"upstream", e.upstream.Addr}, func(v float64) bool { return v == 1 }, "1"},
		{"svcnet_dns_cache_hits_total", nil, func(float64) bool { return true }, "present"},
		{"svcnet_dns_autopath_success_total", nil, func(v float64) bool { return v == 1 }, "1"},
	} {
		v, ok := m.Value(w.name, w.labels...)
		if !ok || !w.check(v) {
			t.Errorf("/metrics: %s%q = %v (present %v), want %s", w.name, w.labels, v, ok, w.want)
		}
	}
	for _, h := range []struct {
		name   string
		labels []string
	}{
		{"svcnet_dns_request_duration_seconds", []string{"source", "forward"}},
		{"svcnet_dns_programming_duration_seconds", nil}, // after the API changes of the tests before
		{"svcnet_dns_zone_build_duration_seconds", nil},
	} {
		if n, _ := m.Observed(h.name, h.labels...); n == 0 {
			t.Errorf("/metrics: nothing observed in %s%q", h.name, h.labels)
		}
	}
}

// TestUpstreamDown: with every upstream silent, cluster names and cached
// outside names keep answering at once; only uncached outside names fail.
func TestUpstreamDown(t *testing.T) {
	api := framework.StartAPIServer(t)
	up := dnstest.StartUpstream(t)
	up.Add(t, "cached.example.org. 300 IN A 192.0.2.7")
	d := startDNS(t, api, up.Addr)
	if m := d.query(t, "udp", "cached.example.org.", dns.TypeA); !slices.Equal(addrs(m), []string{"192.0.2.7"}) {
		t.Fatalf("warming the cache: %s", summary(m))
	}
	up.SetDown(true)

	// Uncached names fail over nowhere: SERVFAIL after the forward
	// timeout, and the upstream is marked down.
	for range 2 {
		m, err := d.exchange("udp", "uncached.example.org.", dns.TypeA, 10*time.Second)
		if err != nil || m.Rcode != dns.RcodeServerFailure {
			t.Errorf("uncached name with the upstream down: %s %v, want SERVFAIL", summary(m), err)
		}
	}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"kubernetes.default.svc.cluster.local.", []string{"10.96.0.1"}},
		{"cached.example.org.", []string{"192.0.2.7"}},
	} {
		start := time.Now()
		m := d.query(t, "udp", tc.name, dns.TypeA)
		if !slices.Equal(addrs(m), tc.want) {
			t.Errorf("%s with the upstream down: %s", tc.name, summary(m))
		}
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Errorf("%s took %s with the upstream down: it must not wait for the upstream", tc.name, took)
		}
	}
	if v, ok := metricsAt(t, d.HTTP+"/metrics").Value("svcnet_dns_forward_upstream_healthy", "upstream", up.Addr); !ok || v != 0 {
		t.Errorf("the silent upstream is not marked down in /metrics: %v (present %v)", v, ok)
	}

	up.SetDown(false)
	until(t, "the upstream to be used again", 10*time.Second, func() bool {
		m, err := d.exchange("udp", "uncached.example.org.", dns.TypeA, 3*time.Second)
		return err == nil && m.Rcode == dns.RcodeNameError
	})
}

// TestBadFlags: a wrong command line fails at once and names the flag.
func TestBadFlags(t *testing.T) {
	bin := framework.Binary(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:53"}, "--kubeconfig is required"},
		{[]string{"--kubeconfig", "x", "--listen", "127.0.0.1", "--upstream", "127.0.0.1:53"}, `--listen "127.0.0.1": want ADDRESS:PORT`},
		{[]string{"--kubeconfig", "x", "--listen", "127.0.0.1:0", "--upstream", "dns.example:53"}, `--upstream "dns.example:53"`},
		{[]string{"--kubeconfig", "x", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:53", "--pods", "on"}, "--pods"},
		{[]string{"--kubeconfig", "x", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:53", "--ttl", "0"}, "--ttl 0"},
		{[]string{"--kubeconfig", "x", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:53", "--service-cidr", "10.96/12"}, "--service-cidr"},
		{[]string{"--kubeconfig", "x", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:53", "--zone", "a..b"}, "--zone"},
		{[]string{"--kubeconfig", "x", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:53", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"--kubeconfig", t.TempDir() + "/missing", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:53",
			"--metrics-bind-address", "0", "--health-bind-address", "0"}, "--kubeconfig"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"dns"}, tc.args...)...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("succeeded:\n%s", out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output does not mention %q:\n%s", tc.want, out)
			}
		})
	}
}

// TestStubDomains: names of a --forward zone go to its server; kube-dns's
// ConfigMap adds stub domains and replaces the upstreams without a
// restart; a bad ConfigMap changes nothing and its deletion brings back
// the flags' routes.
func TestStubDomains(t *testing.T) {
	api := framework.StartAPIServer(t)
	def, flagged, acme, other := dnstest.StartUpstream(t), dnstest.StartUpstream(t), dnstest.StartUpstream(t), dnstest.StartUpstream(t)
	for _, u := range []*dnstest.Upstream{def, flagged, acme, other} {
		// Every server answers every name with its own address: the
		// answer says which one was asked.
		ip := map[*dnstest.Upstream]string{def: "192.0.2.1", flagged: "192.0.2.2", acme: "192.0.2.3", other: "192.0.2.4"}[u]
		for _, n := range []string{"www.example.org", "db.flag.example", "www.acme.local", "ns.acme.local", "www.example.net", "late.acme.local", "end.example.org", "back.acme.local"} {
			u.Add(t, n+". 30 IN A "+ip)
		}
	}
	d := startDNS(t, api, def.Addr, "--forward", "flag.example="+flagged.Addr)
	from := func(name string) string {
		t.Helper()
		m, err := d.exchange("udp", name, dns.TypeA, 5*time.Second)
		if err != nil {
			return err.Error()
		}
		if a := addrs(m); len(a) == 1 {
			return a[0]
		}
		return summary(m)
	}
	expect := func(step, name, want string) {
		t.Helper()
		until(t, fmt.Sprintf("%s: %s from %s", step, name, want), 10*time.Second, func() bool { return from(name) == want })
	}
	expect("flags", "www.example.org.", "192.0.2.1")
	expect("flags", "db.flag.example.", "192.0.2.2")

	ctx := framework.Context(t, time.Minute)
	cms := api.Client().CoreV1().ConfigMaps("kube-system")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"}, Data: map[string]string{
		"stubDomains":         fmt.Sprintf(`{"acme.local": [%q]}`, acme.Addr),
		"upstreamNameservers": fmt.Sprintf(`[%q]`, other.Addr),
	}}
	cm, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expect("ConfigMap", "www.acme.local.", "192.0.2.3")
	expect("ConfigMap", "www.example.net.", "192.0.2.4") // upstreamNameservers replace --upstream
	expect("ConfigMap", "db.flag.example.", "192.0.2.2") // --forward stays

	// A bad ConfigMap: logged, nothing changes.
	cm.Data["upstreamNameservers"] = `["not-an-ip"]`
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "the bad ConfigMap to be logged", 10*time.Second, func() bool {
		return strings.Contains(d.proc.Logs(), "not-an-ip")
	})
	expect("bad ConfigMap", "late.acme.local.", "192.0.2.3")
	expect("bad ConfigMap", "end.example.org.", "192.0.2.4")

	// Deleted: back to the flags.
	if err := cms.Delete(ctx, "kube-dns", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("deleted", "back.acme.local.", "192.0.2.1")
}
