package ipvs_test

import (
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/ipvs"
	"github.com/svcnet/svcnet/internal/proxy/proxytest"
	st "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

func configOf(n proxy.NodeConfig) ipvs.Config {
	n.NodePortAddresses = n.NodeIPs
	return ipvs.Config{NodeConfig: n}
}

// TestGolden builds the state of each kube-proxy case and compares it
// with its golden file (go test -update rewrites them).
func TestGolden(t *testing.T) {
	for _, fx := range proxytest.Fixtures {
		t.Run(fx.Name, func(t *testing.T) {
			node, _ := fx.Node()
			s := ipvs.Build(configOf(node), proxytest.Snapshot(fx.Objects))
			proxytest.CompareGolden(t, filepath.Join("testdata", fx.Name+".golden"), []byte(s.Format()))
		})
	}
}

// TestBuild checks the choices the ipvs mode makes, case by case.
func TestBuild(t *testing.T) {
	node := proxytest.Node
	ready := func(ip, nodeName string) st.SliceOption { return st.Endpoint(ip, nodeName) }
	svc := func(opts ...st.ServiceOption) *v1.Service {
		return st.Service("ns", "web", "10.96.0.10", append([]st.ServiceOption{st.Port("http", v1.ProtocolTCP, 80, 30080)}, opts...)...)
	}
	slice := func(eps ...st.SliceOption) *discovery.EndpointSlice {
		return st.Slice("ns", "web", "web-1", append([]st.SliceOption{st.SlicePort("http", v1.ProtocolTCP, 8080)}, eps...)...)
	}
	key := func(addr string, port uint16) string {
		return "TCP " + netip.AddrPortFrom(netip.MustParseAddr(addr), port).String()
	}
	cases := []struct {
		name    string
		objects []any
		want    []string // lines of Format that must be there
		notWant []string
	}{
		{"cluster IP and node port, both endpoints", []any{svc(st.Type(v1.ServiceTypeNodePort)), slice(ready("10.244.1.5", "node-a"), ready("10.244.2.9", "node-b"))},
			[]string{"10.96.0.10\n", key("10.96.0.10", 80) + " rr (cluster-ip", key("192.168.0.10", 30080) + " rr (node-port",
				"  -> 10.244.1.5:8080 Masq 1", "  -> 10.244.2.9:8080 Masq 1",
				"# ipset KUBE-NODE-PORT-TCP bitmap:port\n30080\n", "# ipset KUBE-LOOP-BACK hash:ip,port,ip\n10.244.1.5,tcp:8080,10.244.1.5\n",
				"-m set --match-set KUBE-CLUSTER-IP dst,dst ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ"},
			[]string{"192.168.0.10\n# IPVS"}},
		{"affinity is persistence with the timeout", []any{svc(st.Affinity(600)), slice(ready("10.244.1.5", "node-a"))},
			[]string{key("10.96.0.10", 80) + " rr persistent 600"}, nil},
		{"Local external policy without a local endpoint falls back to the cluster's", []any{svc(st.Type(v1.ServiceTypeNodePort), st.ExternalLocal(0)), slice(ready("10.244.2.9", "node-b"))},
			[]string{key("192.168.0.10", 30080) + " rr (node-port ns/web:http)\n  -> 10.244.2.9:8080", "# ipset KUBE-NODE-PORT-LOCAL-TCP bitmap:port\n30080\n"}, nil},
		{"Local external policy uses only the local endpoint", []any{svc(st.Type(v1.ServiceTypeNodePort), st.ExternalLocal(0)), slice(ready("10.244.1.5", "node-a"), ready("10.244.2.9", "node-b"))},
			[]string{key("192.168.0.10", 30080) + " rr (node-port ns/web:http)\n  -> 10.244.1.5:8080 Masq 1\n#"}, nil},
		{"load balancer with source ranges", []any{svc(st.LoadBalancer("172.18.255.200"), st.SourceRanges("203.0.113.0/24")), slice(ready("10.244.2.9", "node-b"))},
			[]string{"172.18.255.200\n", key("172.18.255.200", 80) + " rr (load-balancer",
				"# ipset KUBE-LOAD-BALANCER-SOURCE-CIDR hash:ip,port,net\n172.18.255.200,tcp:80,203.0.113.0/24\n",
				"-A KUBE-PROXY-FIREWALL", "-A KUBE-IPVS-OUT-FILTER -s 172.18.255.200 -m ipvs --vaddr 172.18.255.200 --vproto tcp --vport 80 -j DROP"}, nil},
		{"no endpoints anywhere: no virtual server, the address bound, not let through (rejected)", []any{svc()},
			[]string{"# kube-ipvs0\n10.96.0.10\n# IPVS\n# ipset KUBE-IPVS-IPS hash:ip\n10.96.0.10\n"}, []string{"KUBE-CLUSTER-IP hash"}},
		{"Local internal policy without a local endpoint falls back to the cluster's, as kube-proxy's ipvs mode", []any{svc(st.InternalLocal()), slice(ready("10.244.2.9", "node-b"))},
			[]string{key("10.96.0.10", 80) + " rr (cluster-ip ns/web:http)\n  -> 10.244.2.9:8080 Masq 1\n"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ipvs.Build(configOf(node), proxytest.Snapshot(tc.objects)).Format()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in:\n%s", w, got)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("unexpected %q in:\n%s", w, got)
				}
			}
		})
	}
}
