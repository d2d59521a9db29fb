// Package proxytest holds what the proxy modes' tests share: the
// kube-proxy cases (services, endpoints, and packets with the fate
// kube-proxy gives them), a tracker to feed them to, and golden files.
// Only tests import it.
package proxytest

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/trace"
	"github.com/svcnet/svcnet/internal/svcstate"
	st "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

// Update makes golden tests rewrite their files (go test -update).
var Update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

var (
	tcp = v1.ProtocolTCP
	udp = v1.ProtocolUDP

	// NodeIP is the address of node-a, the node of every fixture, whose
	// pods are 10.244.1.x; other nodes' pods are 10.244.2.x and 10.244.3.x.
	NodeIP = netip.MustParseAddr("192.168.0.10")
	// Node is the default fixture config.
	Node = proxy.NodeConfig{
		Node:        proxy.Node{Name: "node-a", Zone: "z1"},
		NodeIPs:     []netip.Addr{NodeIP},
		ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"),
	}
	// Env is the tracer's view of node-a.
	Env = trace.Env{LocalAddrs: []netip.Addr{NodeIP}}

	PodOnNode    = netip.MustParseAddr("10.244.1.5")
	PodElsewhere = netip.MustParseAddr("10.244.2.9")
	Outsider     = netip.MustParseAddr("203.0.113.7")
	Stranger     = netip.MustParseAddr("198.18.0.1")
)

// Outcome is what a packet should come to, with its probability.
type Outcome struct {
	Verdict string // ACCEPT, DROP, REJECT
	Dst     string // for ACCEPT
	Masq    bool
	P       float64
}

// To is delivery to dst.
func To(dst string, masq bool, p float64) Outcome { return Outcome{"ACCEPT", dst, masq, p} }

var (
	Rejected = []Outcome{{"REJECT", "", false, 1}}
	Dropped  = []Outcome{{"DROP", "", false, 1}}
)

// Sticky is session affinity already established: the packet's source
// has recently been sent to Endpoint of Port.
type Sticky struct {
	Port     svcstate.ServicePortName
	Endpoint string
}

// Check is a packet and its expected fate.
type Check struct {
	Name     string
	Pkt      trace.Packet
	Affinity []Sticky
	Want     []Outcome
	// WantNFT, when set, is the nftables mode's fate for the packet where
	// kube-proxy's nftables mode differs from its iptables mode.
	WantNFT []Outcome
}

// Pkt is a packet arriving at the node.
func Pkt(src netip.Addr, dst, proto string) trace.Packet {
	return trace.Packet{Src: src, SrcPort: 40000, Dst: netip.MustParseAddrPort(dst), Proto: proto}
}

// FromNode is a packet sent by the node itself.
func FromNode(dst, proto string) trace.Packet {
	p := Pkt(NodeIP, dst, proto)
	p.Local = true
	return p
}

// PortName names a service port.
func PortName(ns, name, port string, proto v1.Protocol) svcstate.ServicePortName {
	return svcstate.ServicePortName{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Port: port, Protocol: proto}
}

// Fixture is one kube-proxy case.
type Fixture struct {
	Name    string
	Config  *proxy.NodeConfig // nil: Node
	Objects []any
	Checks  []Check
}

// Node returns the fixture's node, and the tracer's view of it.
func (f Fixture) Node() (proxy.NodeConfig, trace.Env) {
	if f.Config == nil {
		return Node, Env
	}
	return *f.Config, trace.Env{LocalAddrs: f.Config.NodeIPs}
}

// Third is the share of one of three endpoints.
var Third = 1.0 / 3

// Fixtures are the kube-proxy cases every mode is checked against: its
// rules are traced for each check.
var Fixtures = []Fixture{
	{
		Name: "clusterip",
		Objects: []any{
			st.Service("default", "web", "10.96.0.10", st.Port("http", tcp, 80, 0)),
			st.Slice("default", "web", "web-1", st.SlicePort("http", tcp, 8080),
				st.Endpoint("10.244.1.2", "node-a"), st.Endpoint("10.244.2.2", "node-b"),
				st.Endpoint("10.244.3.2", "node-c"), st.Endpoint("10.244.3.3", "node-c", st.NotReady())),
			st.Service("kube-system", "kube-dns", "10.96.0.53", st.Port("dns", udp, 53, 0), st.Port("dns-tcp", tcp, 53, 0)),
			st.Slice("kube-system", "kube-dns", "kube-dns-1", st.SlicePort("dns", udp, 5353), st.SlicePort("dns-tcp", tcp, 5353),
				st.Endpoint("10.244.2.53", "node-b")),
		},
		Checks: []Check{
			{Name: "pod to cluster IP: even thirds, source kept",
				Pkt:  Pkt(PodOnNode, "10.96.0.10:80", "tcp"),
				Want: []Outcome{To("10.244.1.2:8080", false, Third), To("10.244.2.2:8080", false, Third), To("10.244.3.2:8080", false, Third)}},
			{Name: "off-cluster client is masqueraded",
				Pkt:  Pkt(Outsider, "10.96.0.10:80", "tcp"),
				Want: []Outcome{To("10.244.1.2:8080", true, Third), To("10.244.2.2:8080", true, Third), To("10.244.3.2:8080", true, Third)}},
			{Name: "the node itself is masqueraded",
				Pkt:  FromNode("10.96.0.10:80", "tcp"),
				Want: []Outcome{To("10.244.1.2:8080", true, Third), To("10.244.2.2:8080", true, Third), To("10.244.3.2:8080", true, Third)}},
			{Name: "hairpin: a pod reaching itself is masqueraded",
				Pkt:  Pkt(netip.MustParseAddr("10.244.1.2"), "10.96.0.10:80", "tcp"),
				Want: []Outcome{To("10.244.1.2:8080", true, Third), To("10.244.2.2:8080", false, Third), To("10.244.3.2:8080", false, Third)}},
			{Name: "dns over udp", Pkt: Pkt(PodElsewhere, "10.96.0.53:53", "udp"), Want: []Outcome{To("10.244.2.53:5353", false, 1)}},
			{Name: "dns over tcp", Pkt: Pkt(PodElsewhere, "10.96.0.53:53", "tcp"), Want: []Outcome{To("10.244.2.53:5353", false, 1)}},
			{Name: "other port is not captured", Pkt: Pkt(PodOnNode, "10.96.0.10:81", "tcp"), Want: []Outcome{To("10.96.0.10:81", false, 1)},
				// The nftables mode rejects it (cluster-ips-check).
				WantNFT: Rejected},
		},
	},
	{
		Name: "nodeport",
		Objects: []any{
			st.Service("default", "web", "10.96.0.10", st.Type(v1.ServiceTypeNodePort), st.Port("http", tcp, 80, 30080)),
			st.Slice("default", "web", "web-1", st.SlicePort("http", tcp, 8080),
				st.Endpoint("10.244.1.2", "node-a"), st.Endpoint("10.244.2.2", "node-b")),
		},
		Checks: []Check{
			{Name: "outside client to node port: SNAT so replies come back through this node",
				Pkt:  Pkt(Outsider, "192.168.0.10:30080", "tcp"),
				Want: []Outcome{To("10.244.1.2:8080", true, .5), To("10.244.2.2:8080", true, .5)}},
			{Name: "cluster IP still works", Pkt: Pkt(PodOnNode, "10.96.0.10:80", "tcp"),
				Want: []Outcome{To("10.244.1.2:8080", false, .5), To("10.244.2.2:8080", false, .5)}},
			{Name: "node port on an address that is not the node's",
				Pkt: Pkt(Outsider, "192.168.0.99:30080", "tcp"), Want: []Outcome{To("192.168.0.99:30080", false, 1)}},
			{Name: "the node to its own node port",
				Pkt:  FromNode("192.168.0.10:30080", "tcp"),
				Want: []Outcome{To("10.244.1.2:8080", true, .5), To("10.244.2.2:8080", true, .5)}},
		},
	},
	{
		Name: "nodeport-local",
		Objects: []any{
			st.Service("default", "web", "10.96.0.10", st.Type(v1.ServiceTypeNodePort), st.Port("http", tcp, 80, 30080), st.ExternalLocal(0)),
			st.Slice("default", "web", "web-1", st.SlicePort("http", tcp, 8080),
				st.Endpoint("10.244.1.2", "node-a"), st.Endpoint("10.244.2.2", "node-b")),
			st.Service("default", "elsewhere", "10.96.0.11", st.Type(v1.ServiceTypeNodePort), st.Port("http", tcp, 80, 30081), st.ExternalLocal(0)),
			st.Slice("default", "elsewhere", "elsewhere-1", st.SlicePort("http", tcp, 8080), st.Endpoint("10.244.2.3", "node-b")),
		},
		Checks: []Check{
			{Name: "outside client keeps its address and reaches only the local endpoint",
				Pkt: Pkt(Outsider, "192.168.0.10:30080", "tcp"), Want: []Outcome{To("10.244.1.2:8080", false, 1)}},
			{Name: "a pod going to the node port is short-circuited to all endpoints",
				Pkt:  Pkt(PodOnNode, "192.168.0.10:30080", "tcp"),
				Want: []Outcome{To("10.244.1.2:8080", false, .5), To("10.244.2.2:8080", false, .5)}},
			{Name: "the node going to its node port uses all endpoints, masqueraded",
				Pkt:  FromNode("192.168.0.10:30080", "tcp"),
				Want: []Outcome{To("10.244.1.2:8080", true, .5), To("10.244.2.2:8080", true, .5)}},
			{Name: "no local endpoint: outside traffic is Dropped",
				Pkt: Pkt(Outsider, "192.168.0.10:30081", "tcp"), Want: Dropped},
			{Name: "no local endpoint: pods still get through",
				Pkt: Pkt(PodOnNode, "192.168.0.10:30081", "tcp"), Want: []Outcome{To("10.244.2.3:8080", false, 1)}},
			{Name: "no local endpoint: cluster IP unaffected",
				Pkt: Pkt(PodOnNode, "10.96.0.11:80", "tcp"), Want: []Outcome{To("10.244.2.3:8080", false, 1)}},
		},
	},
	{
		Name: "loadbalancer",
		Objects: []any{
			st.Service("default", "web", "10.96.0.10", st.Port("http", tcp, 80, 30080),
				st.LoadBalancer("198.51.100.10"), st.SourceRanges("203.0.113.0/24")),
			st.Slice("default", "web", "web-1", st.SlicePort("http", tcp, 8080),
				st.Endpoint("10.244.1.2", "node-a"), st.Endpoint("10.244.2.2", "node-b")),
			st.Service("default", "local", "10.96.0.11", st.Port("http", tcp, 80, 30081),
				st.LoadBalancer("198.51.100.11"), st.ExternalLocal(30900)),
			st.Slice("default", "local", "local-1", st.SlicePort("http", tcp, 8080),
				st.Endpoint("10.244.1.3", "node-a"), st.Endpoint("10.244.2.3", "node-b")),
			// Every source range is unusable: the load balancer must fail
			// closed, not open.
			st.Service("default", "closed", "10.96.0.12", st.Port("http", tcp, 80, 30082),
				st.LoadBalancer("198.51.100.12"), st.SourceRanges("not-a-cidr")),
			st.Slice("default", "closed", "closed-1", st.SlicePort("http", tcp, 8080), st.Endpoint("10.244.2.4", "node-b")),
			// A range that holds the node: the node reaches its own VIP,
			// which it sends from as source when the VIP is on the node.
			st.Service("default", "internal", "10.96.0.13", st.Port("http", tcp, 80, 30083),
				st.LoadBalancer("198.51.100.13"), st.SourceRanges("192.168.0.0/24")),
			st.Slice("default", "internal", "internal-1", st.SlicePort("http", tcp, 8080), st.Endpoint("10.244.2.5", "node-b")),
		},
		Checks: []Check{
			{Name: "allowed source to the load-balancer IP",
				Pkt:  Pkt(Outsider, "198.51.100.10:80", "tcp"),
				Want: []Outcome{To("10.244.1.2:8080", true, .5), To("10.244.2.2:8080", true, .5)}},
			{Name: "other sources are Dropped by KUBE-PROXY-FIREWALL",
				Pkt: Pkt(Stranger, "198.51.100.10:80", "tcp"), Want: Dropped},
			{Name: "node ports are not subject to source ranges",
				Pkt:  Pkt(Stranger, "192.168.0.10:30080", "tcp"),
				Want: []Outcome{To("10.244.1.2:8080", true, .5), To("10.244.2.2:8080", true, .5)}},
			{Name: "Local policy load balancer keeps the client address",
				Pkt: Pkt(Stranger, "198.51.100.11:80", "tcp"), Want: []Outcome{To("10.244.1.3:8080", false, 1)}},
			{Name: "health check node port is accepted",
				Pkt: Pkt(Stranger, "192.168.0.10:30900", "tcp"), Want: []Outcome{To("192.168.0.10:30900", false, 1)}},
			{Name: "unusable source ranges admit nobody",
				Pkt: Pkt(Outsider, "198.51.100.12:80", "tcp"), Want: Dropped},
			{Name: "a client in the node's range",
				Pkt: Pkt(netip.MustParseAddr("192.168.0.50"), "198.51.100.13:80", "tcp"), Want: []Outcome{To("10.244.2.5:8080", true, 1)}},
			{Name: "the VIP looping back through the node",
				Pkt: Pkt(netip.MustParseAddr("198.51.100.13"), "198.51.100.13:80", "tcp"), Want: []Outcome{To("10.244.2.5:8080", true, 1)}},
			{Name: "outsiders are still kept out",
				Pkt: Pkt(Outsider, "198.51.100.13:80", "tcp"), Want: Dropped},
			{Name: "unusable source ranges leave the cluster IP alone",
				Pkt: Pkt(PodOnNode, "10.96.0.12:80", "tcp"), Want: []Outcome{To("10.244.2.4:8080", false, 1)}},
		},
	},
	{
		Name: "externalips",
		Objects: []any{
			st.Service("default", "web", "10.96.0.10", st.Port("http", tcp, 80, 0), st.ExternalIPs("203.0.113.50")),
			st.Slice("default", "web", "web-1", st.SlicePort("http", tcp, 8080),
				st.Endpoint("10.244.1.2", "node-a"), st.Endpoint("10.244.2.2", "node-b")),
			st.Service("default", "local", "10.96.0.11", st.Port("http", tcp, 80, 0), st.ExternalIPs("203.0.113.51"), st.ExternalLocal(0)),
			st.Slice("default", "local", "local-1", st.SlicePort("http", tcp, 8080),
				st.Endpoint("10.244.1.3", "node-a"), st.Endpoint("10.244.2.3", "node-b")),
		},
		Checks: []Check{
			{Name: "outside client to external IP, masqueraded",
				Pkt:  Pkt(Outsider, "203.0.113.50:80", "tcp"),
				Want: []Outcome{To("10.244.1.2:8080", true, .5), To("10.244.2.2:8080", true, .5)}},
			{Name: "Local policy external IP: local endpoint, client address kept",
				Pkt: Pkt(Outsider, "203.0.113.51:80", "tcp"), Want: []Outcome{To("10.244.1.3:8080", false, 1)}},
			{Name: "pods reach every endpoint of a Local external IP",
				Pkt:  Pkt(PodOnNode, "203.0.113.51:80", "tcp"),
				Want: []Outcome{To("10.244.1.3:8080", false, .5), To("10.244.2.3:8080", false, .5)}},
		},
	},
	{
		Name: "affinity",
		Objects: []any{
			st.Service("default", "web", "10.96.0.10", st.Port("http", tcp, 80, 0), st.Affinity(600)),
			st.Slice("default", "web", "web-1", st.SlicePort("http", tcp, 8080),
				st.Endpoint("10.244.1.2", "node-a"), st.Endpoint("10.244.2.2", "node-b"), st.Endpoint("10.244.3.2", "node-c")),
		},
		Checks: []Check{
			{Name: "first connection: even thirds",
				Pkt:  Pkt(PodOnNode, "10.96.0.10:80", "tcp"),
				Want: []Outcome{To("10.244.1.2:8080", false, Third), To("10.244.2.2:8080", false, Third), To("10.244.3.2:8080", false, Third)}},
			{Name: "a client seen recently returns to its endpoint",
				Pkt:      Pkt(PodOnNode, "10.96.0.10:80", "tcp"),
				Affinity: []Sticky{{PortName("default", "web", "http", tcp), "10.244.2.2:8080"}},
				Want:     []Outcome{To("10.244.2.2:8080", false, 1)}},
		},
	},
	{
		Name: "internal-local",
		Objects: []any{
			st.Service("default", "web", "10.96.0.10", st.Port("http", tcp, 80, 0), st.InternalLocal()),
			st.Slice("default", "web", "web-1", st.SlicePort("http", tcp, 8080),
				st.Endpoint("10.244.1.2", "node-a"), st.Endpoint("10.244.1.3", "node-a"), st.Endpoint("10.244.2.2", "node-b")),
			st.Service("default", "elsewhere", "10.96.0.11", st.Port("http", tcp, 80, 0), st.InternalLocal()),
			st.Slice("default", "elsewhere", "elsewhere-1", st.SlicePort("http", tcp, 8080), st.Endpoint("10.244.2.3", "node-b")),
		},
		Checks: []Check{
			{Name: "only this node's endpoints",
				Pkt:  Pkt(PodOnNode, "10.96.0.10:80", "tcp"),
				Want: []Outcome{To("10.244.1.2:8080", false, .5), To("10.244.1.3:8080", false, .5)}},
			{Name: "no local endpoint: Dropped, not Rejected",
				Pkt: Pkt(PodOnNode, "10.96.0.11:80", "tcp"), Want: Dropped},
		},
	},
	{
		Name: "terminating",
		Objects: []any{
			st.Service("default", "draining", "10.96.0.10", st.Port("http", tcp, 80, 0)),
			st.Slice("default", "draining", "draining-1", st.SlicePort("http", tcp, 8080),
				st.Endpoint("10.244.1.2", "node-a", st.Terminating(true)), st.Endpoint("10.244.2.2", "node-b", st.Terminating(true)),
				st.Endpoint("10.244.3.2", "node-c", st.Terminating(false))),
			st.Service("default", "rolling", "10.96.0.11", st.Port("http", tcp, 80, 0)),
			st.Slice("default", "rolling", "rolling-1", st.SlicePort("http", tcp, 8080),
				st.Endpoint("10.244.1.3", "node-a", st.Terminating(true)), st.Endpoint("10.244.2.3", "node-b")),
			st.Service("default", "local", "10.96.0.12", st.Type(v1.ServiceTypeNodePort), st.Port("http", tcp, 80, 30080), st.ExternalLocal(0)),
			st.Slice("default", "local", "local-1", st.SlicePort("http", tcp, 8080),
				st.Endpoint("10.244.1.4", "node-a", st.Terminating(true)), st.Endpoint("10.244.2.4", "node-b")),
		},
		Checks: []Check{
			{Name: "nothing ready: serving terminating endpoints take the traffic",
				Pkt:  Pkt(PodOnNode, "10.96.0.10:80", "tcp"),
				Want: []Outcome{To("10.244.1.2:8080", false, .5), To("10.244.2.2:8080", false, .5)}},
			{Name: "something ready: terminating endpoints get nothing",
				Pkt: Pkt(PodOnNode, "10.96.0.11:80", "tcp"), Want: []Outcome{To("10.244.2.3:8080", false, 1)}},
			{Name: "Local policy falls back to the local terminating endpoint",
				Pkt: Pkt(Outsider, "192.168.0.10:30080", "tcp"), Want: []Outcome{To("10.244.1.4:8080", false, 1)}},
			{Name: "while the cluster IP uses the ready one",
				Pkt: Pkt(PodOnNode, "10.96.0.12:80", "tcp"), Want: []Outcome{To("10.244.2.4:8080", false, 1)}},
		},
	},
	{
		Name: "no-endpoints",
		Objects: []any{
			st.Service("default", "empty", "10.96.0.10", st.Port("http", tcp, 80, 30080),
				st.LoadBalancer("198.51.100.10"), st.ExternalIPs("203.0.113.50")),
			st.Slice("default", "empty", "empty-1", st.SlicePort("http", tcp, 8080), st.Endpoint("10.244.2.2", "node-b", st.NotReady())),
		},
		Checks: []Check{
			{Name: "cluster IP is Rejected", Pkt: Pkt(PodOnNode, "10.96.0.10:80", "tcp"), Want: Rejected},
			{Name: "node port is Rejected", Pkt: Pkt(Outsider, "192.168.0.10:30080", "tcp"), Want: Rejected},
			{Name: "load-balancer IP is Rejected", Pkt: Pkt(Outsider, "198.51.100.10:80", "tcp"), Want: Rejected},
			{Name: "external IP is Rejected", Pkt: Pkt(Outsider, "203.0.113.50:80", "tcp"), Want: Rejected},
			{Name: "from the node, too", Pkt: FromNode("10.96.0.10:80", "tcp"), Want: Rejected},
		},
	},
	{
		Name: "ipv6",
		Config: &proxy.NodeConfig{
			Family:      v1.IPv6Protocol,
			Node:        proxy.Node{Name: "node-a"},
			NodeIPs:     []netip.Addr{netip.MustParseAddr("fd00::10")},
			ClusterCIDR: netip.MustParsePrefix("fd00:10:244::/56"),
		},
		Objects: []any{
			st.Service("default", "web", "fd00:10:96::10", st.Port("http", tcp, 80, 30080), st.Type(v1.ServiceTypeNodePort),
				st.ClusterIPs("fd00:10:96::10", "10.96.0.10")),
			st.Slice("default", "web", "web-v6", st.AddressType(discovery.AddressTypeIPv6), st.SlicePort("http", tcp, 8080),
				st.Endpoint("fd00:10:244:1::2", "node-a"), st.Endpoint("fd00:10:244:2::2", "node-b")),
			st.Slice("default", "web", "web-v4", st.SlicePort("http", tcp, 8080), st.Endpoint("10.244.1.2", "node-a")),
		},
		Checks: []Check{
			{Name: "pod to v6 cluster IP",
				Pkt:  Pkt(netip.MustParseAddr("fd00:10:244:1::9"), "[fd00:10:96::10]:80", "tcp"),
				Want: []Outcome{To("[fd00:10:244:1::2]:8080", false, .5), To("[fd00:10:244:2::2]:8080", false, .5)}},
			{Name: "outside to v6 node port",
				Pkt:  Pkt(netip.MustParseAddr("2001:db8::7"), "[fd00::10]:30080", "tcp"),
				Want: []Outcome{To("[fd00:10:244:1::2]:8080", true, .5), To("[fd00:10:244:2::2]:8080", true, .5)}},
		},
	},
}

// QuietTracker is a tracker for node-a that logs nothing.
func QuietTracker() *svcstate.Tracker {
	return svcstate.NewTracker(svcstate.Config{NodeName: "node-a", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// Feed adds fixture objects to a tracker.
func Feed(tr *svcstate.Tracker, objects []any) {
	for _, o := range objects {
		switch o := o.(type) {
		case *v1.Service:
			tr.OnServiceAdd(o)
		case *discovery.EndpointSlice:
			tr.OnEndpointSliceAdd(o)
		default:
			panic("unknown fixture object")
		}
	}
}

// CheckOutcomes compares a trace's outcomes with the expected ones.
func CheckOutcomes(t *testing.T, res *trace.Result, want []Outcome) {
	t.Helper()
	got := res.Outcomes()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		g, w := got[i], want[i]
		ok = g.Verdict == w.Verdict && g.Masquerade == w.Masq && math.Abs(g.Probability-w.P) < 1e-6 &&
			(w.Verdict != "ACCEPT" || g.Dst.String() == w.Dst)
	}
	if !ok || len(res.Warnings) > 0 {
		var b strings.Builder
		res.Write(&b)
		t.Errorf("got %+v\nwant %+v\n%s", got, want, b.String())
	}
}

// CompareGolden compares got with the file at path, or rewrites the file
// with -update.
func CompareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *Update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from the generated rules (go test -update rewrites it):\n%s", path, LineDiff(string(want), string(got)))
	}
}

// LineDiff lists the lines only in want (-) or only in got (+).
func LineDiff(want, got string) string {
	count := map[string]int{}
	for _, l := range strings.Split(want, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(got, "\n") {
		count[l]--
	}
	var b strings.Builder
	for l, n := range count {
		for ; n > 0; n-- {
			b.WriteString("- " + l + "\n")
		}
		for ; n < 0; n++ {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// Snapshot is the snapshot of a quiet tracker fed objects.
func Snapshot(objects []any) *svcstate.Snapshot {
	tr := QuietTracker()
	Feed(tr, objects)
	snap, _ := tr.Snapshot()
	return snap
}

// WebService is web-<i>, the i-th of a run of alike NodePort services
// that tests scale up: ClusterIP 10.96.1.<i>, port http 80/TCP on node
// port 30000+i, and opts.
func WebService(i int, opts ...st.ServiceOption) *v1.Service {
	return st.Service("default", fmt.Sprintf("web-%d", i), fmt.Sprintf("10.96.1.%d", i),
		append([]st.ServiceOption{st.Port("http", v1.ProtocolTCP, 80, int32(30000+i)), st.Type(v1.ServiceTypeNodePort)}, opts...)...)
}

// WebSlice is WebService(i)'s slice: n endpoints 10.244.<2+j>.<i> on
// node-<j>, port http 8080/TCP, the first one ready or not.
func WebSlice(i, n int, firstReady bool) *discovery.EndpointSlice {
	name := fmt.Sprintf("web-%d", i)
	opts := []st.SliceOption{st.SlicePort("http", v1.ProtocolTCP, 8080)}
	for j := range n {
		var eo []st.EndpointOption
		if j == 0 && !firstReady {
			eo = append(eo, st.NotReady())
		}
		opts = append(opts, st.Endpoint(fmt.Sprintf("10.244.%d.%d", 2+j, i), fmt.Sprintf("node-%d", j), eo...))
	}
	return st.Slice("default", name, name+"-abc", opts...)
}
