package proxy_test

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/test/e2e/framework"
	"github.com/svcnet/svcnet/test/vm"
)

func TestProxyIPTables(t *testing.T)  { testProxy(t, "iptables") }
func TestProxyUserspace(t *testing.T) { testProxy(t, "userspace") }
func TestProxyNFTables(t *testing.T)  { testProxy(t, "nftables") }

// TestProxyIPVS runs the same scenarios in the ipvs mode, inside the test
// VM: this machine's kernel has no IPVS.
func TestProxyIPVS(t *testing.T) {
	framework.RequireRoot(t)
	if !vm.Inside(t, vm.Config{
		Timeout: 15 * time.Minute, MemoryMiB: 3072,
		Env: []string{framework.BinaryEnv + "=" + framework.Binary(t)},
		// Bridged traffic through the rules needs br_netfilter, which
		// nothing loads on demand; the rest loads itself.
		Modules: []string{"br_netfilter", "ip_vs"},
	}) {
		return
	}
	// The VM's emulated CPU makes a cluster slow to start: these two
	// scenarios restart the proxy of the one the shared ones ran on.
	c := testProxy(t, "ipvs")
	t.Run("source hashing keeps a client on one endpoint", func(t *testing.T) { testIPVSSourceHashing(t, c.in(t)) })
	t.Run("switching modes to and from ipvs cleans up the other's state", func(t *testing.T) { testIPVSModeSwitch(t, c.in(t)) })
}

// testProxy runs every scenario against one node running `svcnet proxy`
// in mode, one after the other (each cleans up its services), and returns
// the cluster, its services gone.
func testProxy(t *testing.T, mode string) *cluster {
	c := newCluster(t, mode, 4)
	// The API server's own default/kubernetes service has no endpoints.
	c.waitEndpoints(0)
	for _, sc := range []struct {
		name string
		run  func(*testing.T, *cluster)
	}{
		{"cluster IP spreads over every ready endpoint", testClusterIP},
		{"node port, Cluster policy: masqueraded", testNodePortCluster},
		{"node port, Local policy: client address kept", testNodePortLocal},
		{"hairpin: a pod reaches itself through its service", testHairpin},
		{"an unready endpoint gets no new connections", testUnready},
		{"a dead endpoint", testDeadEndpoint},
		{"UDP clients move off a removed endpoint", testUDPConntrack},
		{"a TCP SYN left unanswered by a removed endpoint does not outlive it", testStaleSYN},
		{"ClientIP affinity keeps a client on one endpoint", testAffinity},
		{"a service without endpoints refuses connections at once", testNoEndpoints},
		{"health-check node port for Local policy", testHealthCheckNodePort},
		{"svcnet proxy trace explains a cluster IP", testTraceCommand},
		{"metrics and healthz", testMetrics},
		{"ipvs: a removed endpoint drains its open connection, then goes", testIPVSGracefulTermination},
	} {
		if strings.HasPrefix(sc.name, "ipvs:") && mode != "ipvs" {
			continue
		}
		t.Run(sc.name, func(t *testing.T) { sc.run(t, c.in(t)) })
		// The scenario's services are gone: wait until the proxy has
		// removed them too, before the next one counts endpoints.
		c.waitEndpoints(0)
	}
	return c
}

// in is c for subtest t: what the subtest creates, t cleans up.
func (c *cluster) in(t *testing.T) *cluster {
	sub := *c
	sub.t = t
	return &sub
}

const connections = 300

func testClusterIP(t *testing.T, c *cluster) {
	svc := c.service("spread", nil)
	c.slice(svc, httpPort, v1.ProtocolTCP, ready(c.pods[0]), ready(c.pods[1]), ready(c.pods[2]))
	c.waitEndpoints(3)
	h := c.hit(c.pods[3].ns, fmt.Sprintf("http://%s:80/", svc.Spec.ClusterIP), connections)
	if h.failed > 0 {
		t.Fatalf("%d of %d connections failed: %v", h.failed, connections, h.lastErr)
	}
	t.Logf("%s mode, %d connections from pod-3 to %s:80: %v", c.mode, connections, svc.Spec.ClusterIP, h.byPod)
	for _, p := range c.pods[:3] {
		// Binomial(300, 1/3) has a standard deviation of 8; ±50 is six of
		// them. Userspace mode is exact round-robin.
		if n := h.byPod[p.name]; n < 50 || n > 150 || (c.mode == "userspace" && n != connections/3) {
			t.Errorf("%s got %d of %d connections: %v", p.name, n, connections, h.byPod)
		}
	}
	if c.mode != "userspace" {
		// Pod to pod on the node: the source is kept.
		for p, clients := range h.clients {
			if !clients[c.pods[3].ip] || len(clients) != 1 {
				t.Errorf("%s saw clients %v, want only %s", p, clients, c.pods[3].ip)
			}
		}
	}
}

func nodePort(mutate func(*v1.Service)) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		if mutate != nil {
			mutate(s)
		}
	}
}

func testNodePortCluster(t *testing.T, c *cluster) {
	svc := c.service("np-cluster", nodePort(nil))
	c.slice(svc, httpPort, v1.ProtocolTCP, ready(c.pods[0]), ready(c.pods[1]))
	c.waitEndpoints(2)
	url := fmt.Sprintf("http://%s:%d/", nodeIP, svc.Spec.Ports[0].NodePort)
	h := c.hit(c.out, url, 50)
	if h.failed > 0 || h.byPod["pod-0"] == 0 || h.byPod["pod-1"] == 0 {
		t.Fatalf("node port %s from outside: %v, %d failed (%v)", url, h.byPod, h.failed, h.lastErr)
	}
	// Cluster policy may pick a pod on another node, so the reply must
	// come back through this one: the source is the node's (its address
	// on the pod bridge), never the client's.
	for p, clients := range h.clients {
		if len(clients) != 1 || !clients[bridgeIP] {
			t.Errorf("%s saw clients %v, want %s (masqueraded)", p, clients, bridgeIP)
		}
	}
}

func testNodePortLocal(t *testing.T, c *cluster) {
	svc := c.service("np-local", nodePort(func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	}))
	// pod-0 is local; 10.244.2.10 is on another node, which this test
	// network does not have: reaching it would fail.
	c.slice(svc, httpPort, v1.ProtocolTCP, ready(c.pods[0]), ep{ip: "10.244.2.10", node: "node-2", ready: true})
	c.waitEndpoints(2) // the cluster IP still reaches both
	url := fmt.Sprintf("http://%s:%d/", nodeIP, svc.Spec.Ports[0].NodePort)
	h := c.hit(c.out, url, 30)
	if h.failed > 0 || h.byPod["pod-0"] != 30 {
		t.Fatalf("node port %s with Local policy: %v, %d failed (%v)", url, h.byPod, h.failed, h.lastErr)
	}
	clients := h.clients["pod-0"]
	switch c.mode {
	case "iptables", "nftables":
		if len(clients) != 1 || !clients[clientIP] {
			t.Errorf("pod-0 saw clients %v, want the client's own %s", clients, clientIP)
		}
	case "userspace":
		// A user-space proxy opens its own connection to the pod: the
		// client's address cannot survive it, whatever the policy.
		t.Logf("userspace mode: pod-0 saw %v (the node), as it must", clients)
	}
}

func testHairpin(t *testing.T, c *cluster) {
	svc := c.service("hairpin", nil)
	c.slice(svc, httpPort, v1.ProtocolTCP, ready(c.pods[0]))
	c.waitEndpoints(1)
	h := c.hit(c.pods[0].ns, fmt.Sprintf("http://%s:80/", svc.Spec.ClusterIP), 20)
	if h.failed > 0 || h.byPod["pod-0"] != 20 {
		t.Fatalf("pod-0 to itself through its service: %v, %d failed (%v)", h.byPod, h.failed, h.lastErr)
	}
	// It would drop a reply from its own address to its own address:
	// the request must arrive masqueraded.
	if clients := h.clients["pod-0"]; len(clients) != 1 || !clients[bridgeIP] {
		t.Errorf("pod-0 saw clients %v, want %s", clients, bridgeIP)
	}
}

func testUnready(t *testing.T, c *cluster) {
	svc := c.service("unready", nil)
	c.slice(svc, httpPort, v1.ProtocolTCP, ready(c.pods[0]), ready(c.pods[1]), ready(c.pods[2]))
	c.waitEndpoints(3)
	url := fmt.Sprintf("http://%s:80/", svc.Spec.ClusterIP)
	if h := c.hit(c.pods[3].ns, url, 30); h.byPod["pod-2"] == 0 {
		t.Fatalf("pod-2 got nothing while ready: %v", h.byPod)
	}
	notReady := ready(c.pods[2])
	notReady.ready = false
	c.slice(svc, httpPort, v1.ProtocolTCP, ready(c.pods[0]), ready(c.pods[1]), notReady)
	c.waitEndpoints(2)
	h := c.hit(c.pods[3].ns, url, connections)
	if h.failed > 0 || h.byPod["pod-2"] != 0 || h.byPod["pod-0"] == 0 || h.byPod["pod-1"] == 0 {
		t.Errorf("after pod-2 turned unready: %v, %d failed (%v)", h.byPod, h.failed, h.lastErr)
	}
	if c.mode != "userspace" {
		// The kernel's rules agree: two endpoints, half each.
		out := c.traceFrom(c.pods[3].ip, svc.Spec.ClusterIP+":80", "tcp").Outcomes()
		if len(out) != 2 || out[0].Probability != 0.5 {
			t.Errorf("trace of the node's rules: %+v", out)
		}
	}
}

func testDeadEndpoint(t *testing.T, c *cluster) {
	// Port 9380: pods 0 and 1 serve it, pod-2 does not (its process
	// died, say) though the API still lists it as ready.
	for _, p := range c.pods[:2] {
		p.serveHTTP(t, 9380)
	}
	svc := c.service("dead", func(s *v1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(9380) })
	c.slice(svc, 9380, v1.ProtocolTCP, ready(c.pods[0]), ready(c.pods[1]), ready(c.pods[2]))
	c.waitEndpoints(3)
	h := c.hit(c.pods[3].ns, fmt.Sprintf("http://%s:80/", svc.Spec.ClusterIP), connections)
	t.Logf("%s mode with a dead endpoint: %v, %d failed", c.mode, h.byPod, h.failed)
	switch c.mode {
	case "userspace":
		// The proxy tries another endpoint: no client notices.
		if h.failed > 0 || h.byPod["pod-0"] != connections/2 || h.byPod["pod-1"] != connections/2 {
			t.Errorf("connections were not retried transparently: %v, %d failed (%v)", h.byPod, h.failed, h.lastErr)
		}
		if v, err := c.metric("svcnet_proxy_userspace_endpoint_dial_failures_total"); err != nil || v < connections/3-1 {
			t.Errorf("dial failures counted: %v %v", v, err)
		}
	case "iptables", "nftables", "ipvs":
		// The kernel picks at random (ipvs: in turn) and cannot retry:
		// about a third of the connections are refused. That is the
		// documented trade-off.
		if h.failed < connections/6 || h.failed > connections/2 {
			t.Errorf("%d of %d connections failed, expected about a third", h.failed, connections)
		}
	}
}

func testAffinity(t *testing.T, c *cluster) {
	svc := c.service("sticky", func(s *v1.Service) {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}}
	})
	c.slice(svc, httpPort, v1.ProtocolTCP, ready(c.pods[0]), ready(c.pods[1]), ready(c.pods[2]))
	c.waitEndpoints(3)
	h := c.hit(c.pods[3].ns, fmt.Sprintf("http://%s:80/", svc.Spec.ClusterIP), 60)
	if h.failed > 0 || len(h.byPod) != 1 {
		t.Errorf("%s mode: 60 connections from one client spread over %v (%d failed, %v); affinity keeps them on one pod", c.mode, h.byPod, h.failed, h.lastErr)
	}
}

func testNoEndpoints(t *testing.T, c *cluster) {
	if c.mode == "userspace" {
		t.Skip("the userspace mode accepts and closes: it has no kernel reject")
	}
	svc := c.service("empty", nil)
	notReady := ready(c.pods[0])
	notReady.ready = false
	c.slice(svc, httpPort, v1.ProtocolTCP, notReady)
	c.waitEndpoints(0)
	// A real node routes anywhere; this one has no default route, and
	// would answer "network unreachable" before the rules had a say.
	// Route the service range to the outside client, which would ignore
	// the SYN: only the rules can refuse it at once.
	c.node.IP("route", "replace", svc.Spec.ClusterIP+"/32", "via", clientIP)
	t.Cleanup(func() { c.node.IP("route", "del", svc.Spec.ClusterIP+"/32") })
	addr := net.JoinHostPort(svc.Spec.ClusterIP, "80")
	// waitEndpoints(0) held before the service existed: wait until the
	// node has it (a refusal), in modes whose syncs are slow (the ipvs
	// mode in the VM takes seconds).
	c.until("the service to be programmed", 30*time.Second, func() error {
		conn, err := c.pods[3].ns.DialContext(framework.Context(t, time.Second), "tcp", addr)
		if err == nil {
			conn.Close()
			return nil // the assertion below reports it
		}
		if !strings.Contains(err.Error(), "connection refused") {
			return err
		}
		return nil
	})
	start := time.Now()
	conn, err := c.pods[3].ns.DialContext(framework.Context(t, 10*time.Second), "tcp", addr)
	took := time.Since(start)
	if err == nil {
		conn.Close()
		t.Fatalf("%s mode: connected to %s, which has no ready endpoint", c.mode, addr)
	}
	// REJECT answers at once; a dropped SYN would wait for the timeout.
	if !strings.Contains(err.Error(), "connection refused") || took > 2*time.Second {
		t.Errorf("%s mode: %s gave %v after %s, want connection refused at once", c.mode, addr, err, took)
	}
}

func testUDPConntrack(t *testing.T, c *cluster) {
	svc := c.service("udp", func(s *v1.Service) {
		s.Spec.Ports[0] = v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, TargetPort: intstr.FromInt32(udpPort)}
	})
	c.slice(svc, udpPort, v1.ProtocolUDP, ready(c.pods[0]), ready(c.pods[1]))
	c.waitEndpoints(2)
	// One client socket, one source port, talking all the time: one
	// conntrack entry (iptables mode) or one session (userspace mode).
	conn := c.pods[3].ns.ListenPacket("udp", ":0")
	dst := net.JoinHostPort(svc.Spec.ClusterIP, "53")
	var first string
	c.until("a UDP answer", 10*time.Second, func() error {
		a, err := udpExchange(conn, dst)
		first, _, _ = strings.Cut(a, " ")
		return err
	})
	for range 5 {
		if a, err := udpExchange(conn, dst); err != nil || !strings.HasPrefix(a, first+" ") {
			t.Fatalf("the flow moved before any change: %q %v", a, err)
		}
	}
	// Its endpoint leaves the service — the pod itself lives on and would
	// keep answering a stale entry.
	other, gone := c.pods[0], c.pods[1]
	if first == "pod-0" {
		other, gone = c.pods[1], c.pods[0]
	}
	c.slice(svc, udpPort, v1.ProtocolUDP, ready(other))
	stop := time.Now().Add(10 * time.Second)
	moved := false
	for !moved && time.Now().Before(stop) {
		a, _ := udpExchange(conn, dst)
		moved = strings.HasPrefix(a, other.name+" ")
		time.Sleep(20 * time.Millisecond)
	}
	if !moved {
		t.Fatalf("the client still talks to %s, which left the service", gone.name)
	}
	for range 10 {
		if a, err := udpExchange(conn, dst); err != nil || !strings.HasPrefix(a, other.name+" ") {
			t.Errorf("after the move: %q %v", a, err)
		}
	}
}

// testStaleSYN: a connection sent to an endpoint that answers nothing (a
// pod gone before the proxy knew) stays in conntrack in SYN_SENT with its
// DNAT for 120 s, and a retransmitted SYN or a new connection from the
// same source port follows it; the proxy removes such entries with the
// endpoint (kernel modes that NAT through conntrack).
func testStaleSYN(t *testing.T, c *cluster) {
	if c.mode != "iptables" && c.mode != "nftables" {
		return // userspace connects itself; ipvs keeps its own table
	}
	// The endpoint is a pod of another node that is gone: the node
	// routes its address to that node (here the outside client, which
	// drops what is not its own), and no answer comes.
	const gone = "10.244.9.250"
	c.node.IP("route", "add", "10.244.9.0/24", "via", clientIP)
	t.Cleanup(func() { _, _ = c.node.Try("ip", "route", "del", "10.244.9.0/24") })
	c.pods[0].serveHTTP(t, 9382)
	svc := c.service("stale-syn", func(s *v1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(9382) })
	c.slice(svc, 9382, v1.ProtocolTCP, ready(c.pods[0]), ep{ip: gone, node: nodeName, ready: true})
	c.waitEndpoints(2)
	addr := net.JoinHostPort(svc.Spec.ClusterIP, "80")
	dialFrom := func(port int) error {
		return c.pods[3].ns.Do(func() error {
			d := net.Dialer{LocalAddr: &net.TCPAddr{Port: port}, Timeout: 300 * time.Millisecond}
			conn, err := d.Dial("tcp", addr)
			if err == nil {
				conn.Close()
			}
			return err
		})
	}
	// New connections from fixed ports until one goes to the gone
	// endpoint (each does with probability 1/2).
	port := 0
	var dialErr error
	for p := 42100; p < 42140 && port == 0; p++ {
		if dialErr = dialFrom(p); dialErr != nil {
			port = p
		}
	}
	if port == 0 {
		t.Fatal("none of 40 connections went to the endpoint that answers nothing")
	}
	if out, _ := c.node.Try("conntrack", "-L", "-p", "tcp", "--dst-nat", gone); !strings.Contains(out, "SYN_SENT") {
		all, _ := c.node.Try("conntrack", "-L", "-p", "tcp")
		t.Fatalf("no unanswered entry to %s in conntrack after %v from port %d:\n%s\nall:\n%s", gone, dialErr, port, out, all)
	}
	c.slice(svc, 9382, v1.ProtocolTCP, ready(c.pods[0]))
	c.waitEndpoints(1)
	c.until("the unanswered entry to go", 10*time.Second, func() error {
		if out, _ := c.node.Try("conntrack", "-L", "-p", "tcp", "--dst-nat", gone); strings.Contains(out, "SYN_SENT") {
			return fmt.Errorf("still there:\n%s", out)
		}
		return nil
	})
	// The same source port now goes where the rules say.
	if err := dialFrom(port); err != nil {
		t.Errorf("%s mode: a new connection from port %d after the endpoint left: %v", c.mode, port, err)
	}
}

func testHealthCheckNodePort(t *testing.T, c *cluster) {
	svc := c.service("lb-local", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	})
	if svc.Spec.HealthCheckNodePort == 0 {
		t.Fatal("the API server allocated no health-check node port")
	}
	url := fmt.Sprintf("http://%s:%d/", nodeIP, svc.Spec.HealthCheckNodePort)
	check := func(wantCode, wantLocal int) {
		t.Helper()
		c.until(fmt.Sprintf("health check %d with %d local endpoints", wantCode, wantLocal), 20*time.Second, func() error {
			code, body, err := c.get(c.out, url)
			if err != nil {
				return err
			}
			var r struct {
				Service             struct{ Namespace, Name string }
				LocalEndpoints      int  `json:"localEndpoints"`
				ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
			}
			if err := json.Unmarshal([]byte(body), &r); err != nil {
				return fmt.Errorf("%d %q: %w", code, body, err)
			}
			if code != wantCode || r.LocalEndpoints != wantLocal || r.Service.Name != "lb-local" || !r.ServiceProxyHealthy {
				return fmt.Errorf("%d %s", code, body)
			}
			return nil
		})
	}
	c.slice(svc, httpPort, v1.ProtocolTCP, ready(c.pods[0]), ready(c.pods[1]), ep{ip: "10.244.2.10", node: "node-2", ready: true})
	check(200, 2)
	notReady := ready(c.pods[0])
	notReady.ready = false
	c.slice(svc, httpPort, v1.ProtocolTCP, notReady, ep{ip: "10.244.2.10", node: "node-2", ready: true})
	check(503, 0)
}

func testTraceCommand(t *testing.T, c *cluster) {
	svc := c.service("hostnames", nil)
	c.slice(svc, httpPort, v1.ProtocolTCP, ready(c.pods[0]), ready(c.pods[1]), ready(c.pods[2]))
	c.waitEndpoints(3)
	out := c.node.Run(framework.Binary(t), "proxy", "trace", "--src", c.pods[3].ip, "--dst", svc.Spec.ClusterIP+":80/tcp")
	t.Logf("svcnet proxy trace --src %s --dst %s:80/tcp (%s mode):\n%s", c.pods[3].ip, svc.Spec.ClusterIP, c.mode, out)
	if c.mode == "userspace" {
		if !strings.Contains(out, "REDIRECT") || !strings.Contains(out, "100.00%  delivered to "+bridgeIP+":") {
			t.Errorf("trace does not show the redirect to the proxy socket")
		}
		return
	}
	for _, p := range c.pods[:3] {
		if !strings.Contains(out, fmt.Sprintf("33.33%%  delivered to %s:%d (DNAT), source kept", p.ip, httpPort)) {
			t.Errorf("trace does not send a third to %s", p.ip)
		}
	}
	// Each mode's own words for the path.
	for _, want := range map[string][]string{
		"iptables": {"KUBE-SERVICES", "KUBE-SVC-", "KUBE-SEP-", "random 0.333", "random 0.5"},
		"nftables": {"ip kube-proxy services", "vmap @service-ips", "[matched goto service-", "dnat ip to numgen random mod 3 map {", "[random 0 of 3 (probability 0.3333333333)]"},
		"ipvs":     {"matched KUBE-CLUSTER-IP, source inside the cluster CIDR", "virtual server, scheduler rr", "weight 1 of 3, masquerade forwarding"},
	}[c.mode] {
		if !strings.Contains(out, want) {
			t.Errorf("trace lacks %q", want)
		}
	}
}

func testMetrics(t *testing.T, c *cluster) {
	_, body, err := c.get(c.node, "http://127.0.0.1:10249/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, err := framework.ParseMetrics(body)
	if err != nil {
		t.Fatal(err)
	}
	// Every proxier synced at least once, and no sync failed.
	type sample struct {
		name   string
		labels []string
		check  func(v float64) bool
		want   string
	}
	positive := func(v float64) bool { return v > 0 }
	zero := func(v float64) bool { return v == 0 }
	any := func(float64) bool { return true }
	want := []sample{
		{"svcnet_proxy_endpoints", nil, any, "present"},
		{"kubeproxy_sync_proxy_rules_last_timestamp_seconds", nil, positive, "> 0"},
	}
	families := []string{"IPv4"}
	if c.mode != "ipvs" && c.mode != "userspace" { // the IPv6 side too
		families = append(families, "IPv6")
	}
	for _, f := range families {
		if c.mode == "nftables" {
			want = append(want, sample{"kubeproxy_sync_proxy_rules_nftables_sync_failures_total", []string{"ip_family", f}, zero, "0"})
		} else {
			want = append(want,
				sample{"kubeproxy_sync_proxy_rules_iptables_restore_failures_total", []string{"ip_family", f}, zero, "0"},
				sample{"kubeproxy_sync_proxy_rules_iptables_total", []string{"ip_family", f, "table", "nat"}, positive, "> 0"})
		}
	}
	if c.mode == "nftables" {
		want = append(want, sample{"svcnet_proxy_nftables_elements", nil, any, "present"})
	}
	for _, w := range want {
		v, ok := m.Value(w.name, w.labels...)
		if !ok || !w.check(v) {
			t.Errorf("/metrics: %s%q = %v (present %v), want %s", w.name, w.labels, v, ok, w.want)
		}
	}
	if n, _ := m.Observed("kubeproxy_sync_proxy_rules_duration_seconds"); n == 0 {
		t.Error("/metrics: no sync observed in kubeproxy_sync_proxy_rules_duration_seconds")
	}
	if m["kubeproxy_network_programming_duration_seconds"] == nil {
		t.Error("/metrics lacks kubeproxy_network_programming_duration_seconds")
	}
	code, body, err := c.get(c.out, fmt.Sprintf("http://%s:10256/healthz", nodeIP))
	if err != nil || code != 200 || !strings.Contains(body, `"nodeEligible": true`) {
		t.Errorf("/healthz from outside the node: %d %s %v", code, body, err)
	}
	if logs := c.proxy.Logs(); !strings.Contains(logs, "changed=") {
		t.Errorf("the proxy's logs do not say what changed:\n%s", logs)
	}
}
