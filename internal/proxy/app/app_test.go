package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/internal/freeport"
	"github.com/svcnet/svcnet/internal/iptables/iptablestest"
	kipvs "github.com/svcnet/svcnet/internal/ipvs"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/conntrack"
	"github.com/svcnet/svcnet/internal/proxy/healthcheck"
	"github.com/svcnet/svcnet/internal/proxy/iptables"
	"github.com/svcnet/svcnet/internal/proxy/trace"
	"github.com/svcnet/svcnet/internal/proxy/userspace"
	"github.com/svcnet/svcnet/internal/svcstate"
	. "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// ipvsRefusal is the ipvs mode's refusal on a kernel without IPVS (this
// machine's), nothing where the kernel has it (the test VM's).
func ipvsRefusal() string {
	if kipvs.Supported() == nil {
		return ""
	}
	return "--proxy-mode ipvs: this kernel has no IPVS (no ip_vs module, none built in); modes that work on this kernel: iptables, userspace, nftables, ebpf"
}

func TestModes(t *testing.T) {
	cases := []struct {
		mode    string
		wantErr string
	}{
		{mode: "iptables"},
		{mode: "userspace"},
		{mode: ""},
		{mode: "IPTables"},
		{mode: "nftables"},
		{mode: "ipvs", wantErr: ipvsRefusal()},
		{mode: "ebpf", wantErr: "--proxy-mode ebpf: --ebpf-cgroup is required: the cgroup v2 group whose processes (the node's pods) connect through the programs"},
		{mode: "kernelspace", wantErr: "--proxy-mode kernelspace: unknown proxy mode; available modes: iptables, userspace, nftables, ipvs, ebpf"},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			o := Defaults()
			o.Mode = tc.mode
			err := o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name    string
		change  func(*Options)
		wantErr string
	}{
		{"defaults", func(*Options) {}, ""},
		{"dual-stack cluster CIDR", func(o *Options) { o.ClusterCIDR = "10.244.0.0/16,fd00:10:244::/56" }, ""},
		{"bad cluster CIDR", func(o *Options) { o.ClusterCIDR = "10.244.0.0" }, "--cluster-cidr"},
		{"bare bind IP", func(o *Options) { o.HealthzBindAddress = "127.0.0.1" }, ""},
		{"bad bind address", func(o *Options) { o.MetricsBindAddress = "localhost" }, "--metrics-bind-address"},
		{"bad node port address", func(o *Options) { o.NodePortAddresses = []string{"10.0.0.0/33"} }, "--nodeport-addresses"},
		{"masquerade bit", func(o *Options) { o.MasqueradeBit = 32 }, "--iptables-masquerade-bit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := Defaults()
			tc.change(&o)
			err := o.Validate()
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestNodePortAddresses(t *testing.T) {
	o := Defaults()
	o.NodePortAddresses = []string{"192.168.77.0/24", "10.0.0.9", "fd00::1"}
	local := []netip.Addr{netip.MustParseAddr("192.168.77.1"), netip.MustParseAddr("10.244.1.1")}
	got := o.nodePortAddresses(local, v1.IPv4Protocol)
	if fmt.Sprint(got) != "[10.0.0.9 192.168.77.1]" {
		t.Errorf("got %v", got)
	}
	// kube-proxy's defaults: all local addresses in the iptables mode
	// (none listed), the node's primary ones in the nftables mode.
	for _, c := range []struct {
		mode  string
		addrs []string
		want  string
	}{
		{"iptables", nil, "[]"},
		{"nftables", nil, "[192.168.77.1 10.244.1.1]"},
		{"iptables", []string{"primary"}, "[192.168.77.1 10.244.1.1]"},
		{"nftables", []string{"10.0.0.9"}, "[10.0.0.9]"},
	} {
		o := Defaults()
		o.Mode, o.NodePortAddresses = c.mode, c.addrs
		if got := fmt.Sprint(o.nodePortAddresses(local, v1.IPv4Protocol)); got != c.want {
			t.Errorf("%s mode, --nodeport-addresses %v: got %s, want %s", c.mode, c.addrs, got, c.want)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRunIPTables runs the whole assembly against a fake API and a fake
// kernel: rules, health-check node ports, conntrack cleanup, servers.
func TestRunIPTables(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	nodeIP := netip.MustParseAddr("192.168.77.1")
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: nodeIP.String()}}}})
	kernel := iptablestest.NewFake()
	ct := &conntrack.Fake{}
	hc := &healthcheck.Loopback{}
	o := Defaults()
	o.HostnameOverride, o.ClusterCIDR = "node-1", "10.244.0.0/16"
	o.MetricsBindAddress, o.HealthzBindAddress = freeport.Addr(t), freeport.Addr(t)
	done := make(chan error, 1)
	go func() {
		done <- RunWith(ctx, o, client, OS{IPTables: kernel, Conntrack: ct, Interfaces: StaticInterfaces{nodeIP},
			HealthCheckListener: hc})
	}()

	create := func(obj any) {
		t.Helper()
		var err error
		switch obj := obj.(type) {
		case *v1.Service:
			_, err = client.CoreV1().Services(obj.Namespace).Create(ctx, obj, metav1.CreateOptions{})
		case *discovery.EndpointSlice:
			_, err = client.DiscoveryV1().EndpointSlices(obj.Namespace).Create(ctx, obj, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	dns := Slice("kube-system", "dns", "dns-1", SlicePort("dns", v1.ProtocolUDP, 5353),
		Endpoint("10.244.1.53", "node-1"), Endpoint("10.244.2.53", "node-2"))
	create(Service("kube-system", "dns", "10.96.0.10", Port("dns", v1.ProtocolUDP, 53, 0)))
	create(dns)
	create(Service("default", "lb", "10.96.0.20", Port("http", v1.ProtocolTCP, 80, 30080), LoadBalancer("198.51.100.1"), ExternalLocal(30900)))
	create(Slice("default", "lb", "lb-1", SlicePort("http", v1.ProtocolTCP, 8080), Endpoint("10.244.1.2", "node-1"), Endpoint("10.244.2.2", "node-2")))

	outcomes := func(pkt trace.Packet) int {
		var all []byte
		for _, table := range []string{"filter", "nat"} {
			b, _ := kernel.Save(ctx, table)
			all = append(all, b...)
		}
		rs, err := trace.Parse(all)
		if err != nil {
			t.Fatal(err)
		}
		return len(trace.Trace(rs, pkt, trace.Env{LocalAddrs: []netip.Addr{nodeIP}}).Outcomes())
	}
	toDNS := trace.Packet{Src: netip.MustParseAddr("10.244.1.5"), Dst: netip.MustParseAddrPort("10.96.0.10:53"), Proto: "udp"}
	fromOutside := trace.Packet{Src: netip.MustParseAddr("203.0.113.9"), Dst: netip.MustParseAddrPort("198.51.100.1:80"), Proto: "tcp"}
	waitFor(t, "the DNS service's rules", func() bool { return outcomes(toDNS) == 2 })
	waitFor(t, "the load balancer's rules (local endpoint only)", func() bool { return outcomes(fromOutside) == 1 })

	// The health-check node port says one local endpoint.
	waitFor(t, "the health-check node port", func() bool { return hc.Addr(30900) != "" })
	// The port opens as the service appears; its count follows.
	var code int
	var body string
	waitFor(t, "the health check to count one local endpoint", func() bool {
		code, body = get("http://" + hc.Addr(30900) + "/")
		return code == 200 && strings.Contains(body, `"localEndpoints": 1`)
	})
	if code, body := get("http://" + o.HealthzBindAddress + "/healthz"); code != 200 || !strings.Contains(body, "lastUpdated") {
		t.Errorf("/healthz: %d %s", code, body)
	}
	code, body = get("http://" + o.MetricsBindAddress + "/metrics")
	for _, m := range []string{"kubeproxy_sync_proxy_rules_duration_seconds", "kubeproxy_network_programming_duration_seconds",
		"kubeproxy_sync_proxy_rules_iptables_total", "svcnet_proxy_endpoints", "kubeproxy_sync_proxy_rules_iptables_restore_failures_total"} {
		if code != 200 || !strings.Contains(body, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	if code, body := get("http://" + o.MetricsBindAddress + "/proxyMode"); code != 200 || body != "iptables" {
		t.Errorf("/proxyMode: %d %q", code, body)
	}

	// A DNS endpoint goes: its UDP conntrack entries go with it.
	ct.Calls()
	dns.Endpoints = dns.Endpoints[:1]
	if _, err := client.DiscoveryV1().EndpointSlices("kube-system").Update(ctx, dns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var calls []string
	waitFor(t, "conntrack cleanup", func() bool { calls = append(calls, ct.Calls()...); return len(calls) > 0 })
	if fmt.Sprint(calls) != "[nat udp 10.96.0.10 -> 10.244.2.53]" {
		t.Errorf("conntrack calls %v", calls)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

// TestCleanup programs both modes' rules into one fake kernel and
// removes them mode by mode.
func TestCleanup(t *testing.T) {
	ctx := context.Background()
	kernel := iptablestest.NewFake()
	tr := svcstate.NewTracker(svcstate.Config{NodeName: "node-1", Logger: quiet})
	tr.OnServiceAdd(Service("default", "web", "10.96.0.20", Port("http", v1.ProtocolTCP, 80, 30080), Type(v1.ServiceTypeNodePort)))
	tr.OnEndpointSliceAdd(Slice("default", "web", "web-1", SlicePort("http", v1.ProtocolTCP, 8080), Endpoint("10.244.1.2", "node-1")))
	ipt, err := iptables.NewProxier(iptables.ProxierConfig{Sync: proxy.SyncerConfig{Tracker: tr, Logger: quiet}, Executor: kernel})
	if err != nil {
		t.Fatal(err)
	}
	if err := ipt.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	us, err := userspace.NewProxier(userspace.Config{Sync: proxy.SyncerConfig{Tracker: svcstate.NewTracker(svcstate.Config{Logger: quiet}), Logger: quiet}, Executor: kernel})
	if err != nil {
		t.Fatal(err)
	}
	defer us.Close()
	if err := us.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	save := func() string {
		var b strings.Builder
		for _, table := range []string{"mangle", "filter", "nat"} {
			data, _ := kernel.Save(ctx, table)
			b.Write(data)
		}
		return b.String()
	}
	if s := save(); !strings.Contains(s, "KUBE-PORTALS-HOST") || !strings.Contains(s, "KUBE-SVC-") {
		t.Fatalf("both modes' rules expected:\n%s", s)
	}
	if err := userspace.Cleanup(ctx, kernel); err != nil {
		t.Fatal(err)
	}
	if s := save(); strings.Contains(s, "KUBE-PORTALS") || strings.Contains(s, "KUBE-NODEPORT-") || !strings.Contains(s, "KUBE-SVC-") {
		t.Errorf("after the userspace cleanup:\n%s", s)
	}
	if err := CleanupAll(ctx, OS{IPTables: kernel}); err != nil {
		t.Fatal(err)
	}
	if s := save(); strings.Contains(s, "KUBE-") || strings.Contains(s, "-A ") {
		t.Errorf("after cleaning up every mode:\n%s", s)
	}
}
