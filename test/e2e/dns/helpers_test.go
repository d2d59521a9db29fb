package dns_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// Ranges the tests pass to svcnet dns: the API server's default service
// range, and the range the hollow kubelet gives pod addresses from.
const (
	serviceCIDR = "10.96.0.0/12"
	podCIDR     = "10.100.0.0/14"
	kubeDNSIP   = "10.96.0.10"
)

// dnsServer is a running `svcnet dns`.
type dnsServer struct {
	proc *framework.Process
	// Addr is the DNS address (UDP and TCP), HTTP the base URL of
	// /metrics, /healthz and /readyz.
	Addr string
	HTTP string
}

var (
	listenLine = regexp.MustCompile(`msg="DNS server listening" addr=(\S+)`)
	httpLine   = regexp.MustCompile(`msg="DNS HTTP endpoints" addr=(\S+)`)
)

// startDNS runs `svcnet dns` against api on random loopback ports with
// upstream as its only upstream, and waits until it is ready. It never
// reads the machine's resolv.conf.
func startDNS(t testing.TB, api *framework.APIServer, upstream string, extra ...string) *dnsServer {
	t.Helper()
	return startDNSOnCPUs(t, "", api, upstream, extra...)
}

// startDNSOnCPUs is startDNS with the server bound to cpus ("" for any).
func startDNSOnCPUs(t testing.TB, cpus string, api *framework.APIServer, upstream string, extra ...string) *dnsServer {
	t.Helper()
	args := append([]string{"dns",
		"--kubeconfig", api.KubeconfigOf("dns"),
		"--listen", "127.0.0.1:0",
		"--upstream", upstream,
		"--resolv-conf", "",
		"--metrics-bind-address", "127.0.0.1:0", "--profiling",
		"--health-bind-address", "127.0.0.1:0",
		"--service-cidr", serviceCIDR,
		"--pod-cidr", podCIDR,
	}, extra...)
	p := framework.StartProcessOnCPUs(t, cpus, args...)
	s := &dnsServer{proc: p}
	deadline := time.Now().Add(30 * time.Second)
	for s.Addr == "" || s.HTTP == "" {
		if p.Exited() {
			t.Fatalf("svcnet dns exited:\n%s", p.Logs())
		}
		if time.Now().After(deadline) {
			t.Fatalf("svcnet dns did not start in 30s:\n%s", p.Logs())
		}
		logs := p.Logs()
		if m := listenLine.FindStringSubmatch(logs); m != nil {
			s.Addr = m[1]
		}
		if m := httpLine.FindStringSubmatch(logs); m != nil {
			s.HTTP = "http://" + m[1]
		}
		time.Sleep(10 * time.Millisecond)
	}
	until(t, "svcnet dns /readyz", 30*time.Second, func() bool {
		code, _ := s.get(t, "/readyz")
		return code == http.StatusOK
	})
	return s
}

func (s *dnsServer) get(t testing.TB, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(s.HTTP + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// query asks the server one question over proto (udp or tcp), with EDNS
// as a modern stub resolver does.
func (s *dnsServer) query(t testing.TB, proto, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m, err := s.exchange(proto, name, qtype, 3*time.Second)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", name, dns.TypeToString[qtype], proto, err)
	}
	return m
}

func (s *dnsServer) exchange(proto, name string, qtype uint16, timeout time.Duration) (*dns.Msg, error) {
	req := new(dns.Msg)
	req.SetQuestion(name, qtype)
	req.SetEdns0(1232, false)
	c := &dns.Client{Net: proto, Timeout: timeout}
	m, _, err := c.Exchange(req, s.Addr)
	return m, err
}

// addrs are the A and AAAA data of an answer, sorted.
func addrs(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch v := rr.(type) {
		case *dns.A:
			out = append(out, v.A.String())
		case *dns.AAAA:
			out = append(out, v.AAAA.String())
		}
	}
	slices.Sort(out)
	return out
}

func summary(m *dns.Msg) string {
	if m == nil {
		return "<nil>"
	}
	var rrs []string
	for _, rr := range m.Answer {
		rrs = append(rrs, strings.ReplaceAll(rr.String(), "\t", " "))
	}
	return fmt.Sprintf("%s aa=%v answer=%q ns=%d", dns.RcodeToString[m.Rcode], m.Authoritative, rrs, len(m.Ns))
}

// until polls cond every 10 ms until it holds or timeout passes.
func until(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// env is one cluster for the tests that share it: an API server, the
// controller manager (for EndpointSlices and scheduling), a hollow
// kubelet, a fake upstream and `svcnet dns`.
type env struct {
	api      *framework.APIServer
	client   kubernetes.Interface
	kubelet  *framework.HollowKubelet
	upstream *dnstest.Upstream
	dns      *dnsServer
}

func startEnv(t *testing.T, dnsArgs ...string) *env {
	t.Helper()
	api := framework.StartAPIServer(t)
	e := &env{api: api, client: api.Client()}
	framework.StartControllerManager(t, api, nil)
	e.kubelet = framework.StartHollowKubelet(t, e.client, "node-1", "node-2")
	ctx := framework.Context(t, time.Minute)
	kubeDNS := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"},
		Spec: corev1.ServiceSpec{ClusterIP: kubeDNSIP, Selector: map[string]string{"k8s-app": "kube-dns"},
			Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}, {Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP}}},
	}
	if _, err := e.client.CoreV1().Services("kube-system").Create(ctx, kubeDNS, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.upstream = dnstest.StartUpstream(t)
	e.dns = startDNS(t, api, e.upstream.Addr, dnsArgs...)
	return e
}

// createKubeDNS makes the kube-system/kube-dns Service, UDP port 53 on
// kubeDNSIP and no selector, for the benchmarks' API servers.
func createKubeDNS(b *testing.B, client kubernetes.Interface) {
	kubeDNS := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"},
		Spec: corev1.ServiceSpec{ClusterIP: kubeDNSIP, Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}}
	if _, err := client.CoreV1().Services("kube-system").Create(context.Background(), kubeDNS, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}

func (e *env) ctx(t *testing.T) context.Context { return framework.Context(t, 2*time.Minute) }

// cpuSeconds is the CPU time the server process has used so far, from
// its own /metrics.
func (s *dnsServer) cpuSeconds(t testing.TB) float64 {
	t.Helper()
	return cpuSecondsAt(t, s.HTTP+"/metrics")
}

// cpuSecondsAt reads process_cpu_seconds_total from a Prometheus
// endpoint (svcnet dns's, CoreDNS's).
func cpuSecondsAt(t testing.TB, url string) float64 {
	t.Helper()
	v, ok := metricsAt(t, url).Value("process_cpu_seconds_total")
	if !ok {
		t.Fatalf("%s has no process_cpu_seconds_total", url)
	}
	return v
}

// metricsAt is what a Prometheus endpoint serves, parsed.
func metricsAt(t testing.TB, url string) framework.Metrics {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	m, err := framework.ParseMetrics(string(body))
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return m
}

// profile starts a CPU profile of the server for seconds and delivers it
// on the returned channel.
func (s *dnsServer) profile(t testing.TB, seconds int) chan []byte {
	ch := make(chan []byte, 1)
	go func() {
		c := &http.Client{Timeout: time.Duration(seconds+30) * time.Second}
		resp, err := c.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", s.HTTP, seconds))
		if err != nil {
			t.Errorf("profile: %v", err)
			ch <- nil
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		ch <- b
	}()
	return ch
}
