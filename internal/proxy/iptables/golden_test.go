package iptables_test

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/iptables/iptablestest"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/iptables"
	"github.com/svcnet/svcnet/internal/proxy/trace"
	"github.com/svcnet/svcnet/internal/svcstate"
	. "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

var (
	tcp = v1.ProtocolTCP
	udp = v1.ProtocolUDP

	nodeIP = netip.MustParseAddr("192.168.0.10")
	// The node of every fixture: node-a, whose pods are 10.244.1.x; other
	// nodes' pods are 10.244.2.x and 10.244.3.x.
	nodeConfig = iptables.Config{
		Node:        proxy.Node{Name: "node-a", Zone: "z1"},
		NodeIPs:     []netip.Addr{nodeIP},
		ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"),
	}
	env = trace.Env{LocalAddrs: []netip.Addr{nodeIP}}

	podOnNode   = netip.MustParseAddr("10.244.1.5")
	podElsewere = netip.MustParseAddr("10.244.2.9")
	outsider    = netip.MustParseAddr("203.0.113.7")
	stranger    = netip.MustParseAddr("198.18.0.1")
)

// outcome is what a packet should come to, with its probability.
type outcome struct {
	verdict string // ACCEPT, DROP, REJECT
	dst     string // for ACCEPT
	masq    bool
	p       float64
}

func to(dst string, masq bool, p float64) outcome { return outcome{"ACCEPT", dst, masq, p} }

var (
	rejected = []outcome{{"REJECT", "", false, 1}}
	dropped  = []outcome{{"DROP", "", false, 1}}
)

type check struct {
	name   string
	pkt    trace.Packet
	recent map[string]bool
	want   []outcome
}

func pkt(src netip.Addr, dst, proto string) trace.Packet {
	return trace.Packet{Src: src, SrcPort: 40000, Dst: netip.MustParseAddrPort(dst), Proto: proto}
}

func fromNode(dst, proto string) trace.Packet {
	p := pkt(nodeIP, dst, proto)
	p.Local = true
	return p
}

type fixture struct {
	name    string
	cfg     *iptables.Config
	objects []any
	checks  []check
}

func sepOf(ns, name, port string, proto v1.Protocol, ep string) string {
	return iptables.EndpointChain(svcstate.ServicePortName{
		NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Port: port, Protocol: proto}, ep)
}

var third = 1.0 / 3

var fixtures = []fixture{
	{
		name: "clusterip",
		objects: []any{
			Service("default", "web", "10.96.0.10", Port("http", tcp, 80, 0)),
			Slice("default", "web", "web-1", SlicePort("http", tcp, 8080),
				Endpoint("10.244.1.2", "node-a"), Endpoint("10.244.2.2", "node-b"),
				Endpoint("10.244.3.2", "node-c"), Endpoint("10.244.3.3", "node-c", NotReady())),
			Service("kube-system", "kube-dns", "10.96.0.53", Port("dns", udp, 53, 0), Port("dns-tcp", tcp, 53, 0)),
			Slice("kube-system", "kube-dns", "kube-dns-1", SlicePort("dns", udp, 5353), SlicePort("dns-tcp", tcp, 5353),
				Endpoint("10.244.2.53", "node-b")),
		},
		checks: []check{
			{name: "pod to cluster IP: even thirds, source kept",
				pkt:  pkt(podOnNode, "10.96.0.10:80", "tcp"),
				want: []outcome{to("10.244.1.2:8080", false, third), to("10.244.2.2:8080", false, third), to("10.244.3.2:8080", false, third)}},
			{name: "off-cluster client is masqueraded",
				pkt:  pkt(outsider, "10.96.0.10:80", "tcp"),
				want: []outcome{to("10.244.1.2:8080", true, third), to("10.244.2.2:8080", true, third), to("10.244.3.2:8080", true, third)}},
			{name: "the node itself is masqueraded",
				pkt:  fromNode("10.96.0.10:80", "tcp"),
				want: []outcome{to("10.244.1.2:8080", true, third), to("10.244.2.2:8080", true, third), to("10.244.3.2:8080", true, third)}},
			{name: "hairpin: a pod reaching itself is masqueraded",
				pkt:  pkt(netip.MustParseAddr("10.244.1.2"), "10.96.0.10:80", "tcp"),
				want: []outcome{to("10.244.1.2:8080", true, third), to("10.244.2.2:8080", false, third), to("10.244.3.2:8080", false, third)}},
			{name: "dns over udp", pkt: pkt(podElsewere, "10.96.0.53:53", "udp"), want: []outcome{to("10.244.2.53:5353", false, 1)}},
			{name: "dns over tcp", pkt: pkt(podElsewere, "10.96.0.53:53", "tcp"), want: []outcome{to("10.244.2.53:5353", false, 1)}},
			{name: "other port is not captured", pkt: pkt(podOnNode, "10.96.0.10:81", "tcp"), want: []outcome{to("10.96.0.10:81", false, 1)}},
		},
	},
	{
		name: "nodeport",
		objects: []any{
			Service("default", "web", "10.96.0.10", Type(v1.ServiceTypeNodePort), Port("http", tcp, 80, 30080)),
			Slice("default", "web", "web-1", SlicePort("http", tcp, 8080),
				Endpoint("10.244.1.2", "node-a"), Endpoint("10.244.2.2", "node-b")),
		},
		checks: []check{
			{name: "outside client to node port: SNAT so replies come back through this node",
				pkt:  pkt(outsider, "192.168.0.10:30080", "tcp"),
				want: []outcome{to("10.244.1.2:8080", true, .5), to("10.244.2.2:8080", true, .5)}},
			{name: "cluster IP still works", pkt: pkt(podOnNode, "10.96.0.10:80", "tcp"),
				want: []outcome{to("10.244.1.2:8080", false, .5), to("10.244.2.2:8080", false, .5)}},
			{name: "node port on an address that is not the node's",
				pkt: pkt(outsider, "192.168.0.99:30080", "tcp"), want: []outcome{to("192.168.0.99:30080", false, 1)}},
			{name: "the node to its own node port",
				pkt:  fromNode("192.168.0.10:30080", "tcp"),
				want: []outcome{to("10.244.1.2:8080", true, .5), to("10.244.2.2:8080", true, .5)}},
		},
	},
	{
		name: "nodeport-local",
		objects: []any{
			Service("default", "web", "10.96.0.10", Type(v1.ServiceTypeNodePort), Port("http", tcp, 80, 30080), ExternalLocal(0)),
			Slice("default", "web", "web-1", SlicePort("http", tcp, 8080),
				Endpoint("10.244.1.2", "node-a"), Endpoint("10.244.2.2", "node-b")),
			Service("default", "elsewhere", "10.96.0.11", Type(v1.ServiceTypeNodePort), Port("http", tcp, 80, 30081), ExternalLocal(0)),
			Slice("default", "elsewhere", "elsewhere-1", SlicePort("http", tcp, 8080), Endpoint("10.244.2.3", "node-b")),
		},
		checks: []check{
			{name: "outside client keeps its address and reaches only the local endpoint",
				pkt: pkt(outsider, "192.168.0.10:30080", "tcp"), want: []outcome{to("10.244.1.2:8080", false, 1)}},
			{name: "a pod going to the node port is short-circuited to all endpoints",
				pkt:  pkt(podOnNode, "192.168.0.10:30080", "tcp"),
				want: []outcome{to("10.244.1.2:8080", false, .5), to("10.244.2.2:8080", false, .5)}},
			{name: "the node going to its node port uses all endpoints, masqueraded",
				pkt:  fromNode("192.168.0.10:30080", "tcp"),
				want: []outcome{to("10.244.1.2:8080", true, .5), to("10.244.2.2:8080", true, .5)}},
			{name: "no local endpoint: outside traffic is dropped",
				pkt: pkt(outsider, "192.168.0.10:30081", "tcp"), want: dropped},
			{name: "no local endpoint: pods still get through",
				pkt: pkt(podOnNode, "192.168.0.10:30081", "tcp"), want: []outcome{to("10.244.2.3:8080", false, 1)}},
			{name: "no local endpoint: cluster IP unaffected",
				pkt: pkt(podOnNode, "10.96.0.11:80", "tcp"), want: []outcome{to("10.244.2.3:8080", false, 1)}},
		},
	},
	{
		name: "loadbalancer",
		objects: []any{
			Service("default", "web", "10.96.0.10", Port("http", tcp, 80, 30080),
				LoadBalancer("198.51.100.10"), SourceRanges("203.0.113.0/24")),
			Slice("default", "web", "web-1", SlicePort("http", tcp, 8080),
				Endpoint("10.244.1.2", "node-a"), Endpoint("10.244.2.2", "node-b")),
			Service("default", "local", "10.96.0.11", Port("http", tcp, 80, 30081),
				LoadBalancer("198.51.100.11"), ExternalLocal(30900)),
			Slice("default", "local", "local-1", SlicePort("http", tcp, 8080),
				Endpoint("10.244.1.3", "node-a"), Endpoint("10.244.2.3", "node-b")),
			// Every source range is unusable: the load balancer must fail
			// closed, not open.
			Service("default", "closed", "10.96.0.12", Port("http", tcp, 80, 30082),
				LoadBalancer("198.51.100.12"), SourceRanges("not-a-cidr")),
			Slice("default", "closed", "closed-1", SlicePort("http", tcp, 8080), Endpoint("10.244.2.4", "node-b")),
			// A range that holds the node: the node reaches its own VIP,
			// which it sends from as source when the VIP is on the node.
			Service("default", "internal", "10.96.0.13", Port("http", tcp, 80, 30083),
				LoadBalancer("198.51.100.13"), SourceRanges("192.168.0.0/24")),
			Slice("default", "internal", "internal-1", SlicePort("http", tcp, 8080), Endpoint("10.244.2.5", "node-b")),
		},
		checks: []check{
			{name: "allowed source to the load-balancer IP",
				pkt:  pkt(outsider, "198.51.100.10:80", "tcp"),
				want: []outcome{to("10.244.1.2:8080", true, .5), to("10.244.2.2:8080", true, .5)}},
			{name: "other sources are dropped by KUBE-PROXY-FIREWALL",
				pkt: pkt(stranger, "198.51.100.10:80", "tcp"), want: dropped},
			{name: "node ports are not subject to source ranges",
				pkt:  pkt(stranger, "192.168.0.10:30080", "tcp"),
				want: []outcome{to("10.244.1.2:8080", true, .5), to("10.244.2.2:8080", true, .5)}},
			{name: "Local policy load balancer keeps the client address",
				pkt: pkt(stranger, "198.51.100.11:80", "tcp"), want: []outcome{to("10.244.1.3:8080", false, 1)}},
			{name: "health check node port is accepted",
				pkt: pkt(stranger, "192.168.0.10:30900", "tcp"), want: []outcome{to("192.168.0.10:30900", false, 1)}},
			{name: "unusable source ranges admit nobody",
				pkt: pkt(outsider, "198.51.100.12:80", "tcp"), want: dropped},
			{name: "a client in the node's range",
				pkt: pkt(netip.MustParseAddr("192.168.0.50"), "198.51.100.13:80", "tcp"), want: []outcome{to("10.244.2.5:8080", true, 1)}},
			{name: "the VIP looping back through the node",
				pkt: pkt(netip.MustParseAddr("198.51.100.13"), "198.51.100.13:80", "tcp"), want: []outcome{to("10.244.2.5:8080", true, 1)}},
			{name: "outsiders are still kept out",
				pkt: pkt(outsider, "198.51.100.13:80", "tcp"), want: dropped},
			{name: "unusable source ranges leave the cluster IP alone",
				pkt: pkt(podOnNode, "10.96.0.12:80", "tcp"), want: []outcome{to("10.244.2.4:8080", false, 1)}},
		},
	},
	{
		name: "externalips",
		objects: []any{
			Service("default", "web", "10.96.0.10", Port("http", tcp, 80, 0), ExternalIPs("203.0.113.50")),
			Slice("default", "web", "web-1", SlicePort("http", tcp, 8080),
				Endpoint("10.244.1.2", "node-a"), Endpoint("10.244.2.2", "node-b")),
			Service("default", "local", "10.96.0.11", Port("http", tcp, 80, 0), ExternalIPs("203.0.113.51"), ExternalLocal(0)),
			Slice("default", "local", "local-1", SlicePort("http", tcp, 8080),
				Endpoint("10.244.1.3", "node-a"), Endpoint("10.244.2.3", "node-b")),
		},
		checks: []check{
			{name: "outside client to external IP, masqueraded",
				pkt:  pkt(outsider, "203.0.113.50:80", "tcp"),
				want: []outcome{to("10.244.1.2:8080", true, .5), to("10.244.2.2:8080", true, .5)}},
			{name: "Local policy external IP: local endpoint, client address kept",
				pkt: pkt(outsider, "203.0.113.51:80", "tcp"), want: []outcome{to("10.244.1.3:8080", false, 1)}},
			{name: "pods reach every endpoint of a Local external IP",
				pkt:  pkt(podOnNode, "203.0.113.51:80", "tcp"),
				want: []outcome{to("10.244.1.3:8080", false, .5), to("10.244.2.3:8080", false, .5)}},
		},
	},
	{
		name: "affinity",
		objects: []any{
			Service("default", "web", "10.96.0.10", Port("http", tcp, 80, 0), Affinity(600)),
			Slice("default", "web", "web-1", SlicePort("http", tcp, 8080),
				Endpoint("10.244.1.2", "node-a"), Endpoint("10.244.2.2", "node-b"), Endpoint("10.244.3.2", "node-c")),
		},
		checks: []check{
			{name: "first connection: even thirds",
				pkt:  pkt(podOnNode, "10.96.0.10:80", "tcp"),
				want: []outcome{to("10.244.1.2:8080", false, third), to("10.244.2.2:8080", false, third), to("10.244.3.2:8080", false, third)}},
			{name: "a client seen recently returns to its endpoint",
				pkt:    pkt(podOnNode, "10.96.0.10:80", "tcp"),
				recent: map[string]bool{sepOf("default", "web", "http", tcp, "10.244.2.2:8080"): true},
				want:   []outcome{to("10.244.2.2:8080", false, 1)}},
		},
	},
	{
		name: "internal-local",
		objects: []any{
			Service("default", "web", "10.96.0.10", Port("http", tcp, 80, 0), InternalLocal()),
			Slice("default", "web", "web-1", SlicePort("http", tcp, 8080),
				Endpoint("10.244.1.2", "node-a"), Endpoint("10.244.1.3", "node-a"), Endpoint("10.244.2.2", "node-b")),
			Service("default", "elsewhere", "10.96.0.11", Port("http", tcp, 80, 0), InternalLocal()),
			Slice("default", "elsewhere", "elsewhere-1", SlicePort("http", tcp, 8080), Endpoint("10.244.2.3", "node-b")),
		},
		checks: []check{
			{name: "only this node's endpoints",
				pkt:  pkt(podOnNode, "10.96.0.10:80", "tcp"),
				want: []outcome{to("10.244.1.2:8080", false, .5), to("10.244.1.3:8080", false, .5)}},
			{name: "no local endpoint: dropped, not rejected",
				pkt: pkt(podOnNode, "10.96.0.11:80", "tcp"), want: dropped},
		},
	},
	{
		name: "terminating",
		objects: []any{
			Service("default", "draining", "10.96.0.10", Port("http", tcp, 80, 0)),
			Slice("default", "draining", "draining-1", SlicePort("http", tcp, 8080),
				Endpoint("10.244.1.2", "node-a", Terminating(true)), Endpoint("10.244.2.2", "node-b", Terminating(true)),
				Endpoint("10.244.3.2", "node-c", Terminating(false))),
			Service("default", "rolling", "10.96.0.11", Port("http", tcp, 80, 0)),
			Slice("default", "rolling", "rolling-1", SlicePort("http", tcp, 8080),
				Endpoint("10.244.1.3", "node-a", Terminating(true)), Endpoint("10.244.2.3", "node-b")),
			Service("default", "local", "10.96.0.12", Type(v1.ServiceTypeNodePort), Port("http", tcp, 80, 30080), ExternalLocal(0)),
			Slice("default", "local", "local-1", SlicePort("http", tcp, 8080),
				Endpoint("10.244.1.4", "node-a", Terminating(true)), Endpoint("10.244.2.4", "node-b")),
		},
		checks: []check{
			{name: "nothing ready: serving terminating endpoints take the traffic",
				pkt:  pkt(podOnNode, "10.96.0.10:80", "tcp"),
				want: []outcome{to("10.244.1.2:8080", false, .5), to("10.244.2.2:8080", false, .5)}},
			{name: "something ready: terminating endpoints get nothing",
				pkt: pkt(podOnNode, "10.96.0.11:80", "tcp"), want: []outcome{to("10.244.2.3:8080", false, 1)}},
			{name: "Local policy falls back to the local terminating endpoint",
				pkt: pkt(outsider, "192.168.0.10:30080", "tcp"), want: []outcome{to("10.244.1.4:8080", false, 1)}},
			{name: "while the cluster IP uses the ready one",
				pkt: pkt(podOnNode, "10.96.0.12:80", "tcp"), want: []outcome{to("10.244.2.4:8080", false, 1)}},
		},
	},
	{
		name: "no-endpoints",
		objects: []any{
			Service("default", "empty", "10.96.0.10", Port("http", tcp, 80, 30080),
				LoadBalancer("198.51.100.10"), ExternalIPs("203.0.113.50")),
			Slice("default", "empty", "empty-1", SlicePort("http", tcp, 8080), Endpoint("10.244.2.2", "node-b", NotReady())),
		},
		checks: []check{
			{name: "cluster IP is rejected", pkt: pkt(podOnNode, "10.96.0.10:80", "tcp"), want: rejected},
			{name: "node port is rejected", pkt: pkt(outsider, "192.168.0.10:30080", "tcp"), want: rejected},
			{name: "load-balancer IP is rejected", pkt: pkt(outsider, "198.51.100.10:80", "tcp"), want: rejected},
			{name: "external IP is rejected", pkt: pkt(outsider, "203.0.113.50:80", "tcp"), want: rejected},
			{name: "from the node, too", pkt: fromNode("10.96.0.10:80", "tcp"), want: rejected},
		},
	},
	{
		name: "ipv6",
		cfg: &iptables.Config{
			Family:      v1.IPv6Protocol,
			Node:        proxy.Node{Name: "node-a"},
			NodeIPs:     []netip.Addr{netip.MustParseAddr("fd00::10")},
			ClusterCIDR: netip.MustParsePrefix("fd00:10:244::/56"),
		},
		objects: []any{
			Service("default", "web", "fd00:10:96::10", Port("http", tcp, 80, 30080), Type(v1.ServiceTypeNodePort),
				ClusterIPs("fd00:10:96::10", "10.96.0.10")),
			Slice("default", "web", "web-v6", AddressType(discovery.AddressTypeIPv6), SlicePort("http", tcp, 8080),
				Endpoint("fd00:10:244:1::2", "node-a"), Endpoint("fd00:10:244:2::2", "node-b")),
			Slice("default", "web", "web-v4", SlicePort("http", tcp, 8080), Endpoint("10.244.1.2", "node-a")),
		},
		checks: []check{
			{name: "pod to v6 cluster IP",
				pkt:  pkt(netip.MustParseAddr("fd00:10:244:1::9"), "[fd00:10:96::10]:80", "tcp"),
				want: []outcome{to("[fd00:10:244:1::2]:8080", false, .5), to("[fd00:10:244:2::2]:8080", false, .5)}},
			{name: "outside to v6 node port",
				pkt:  pkt(netip.MustParseAddr("2001:db8::7"), "[fd00::10]:30080", "tcp"),
				want: []outcome{to("[fd00:10:244:1::2]:8080", true, .5), to("[fd00:10:244:2::2]:8080", true, .5)}},
		},
	},
}

func quietTracker() *svcstate.Tracker {
	return svcstate.NewTracker(svcstate.Config{NodeName: "node-a", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func feed(tr *svcstate.Tracker, objects []any) {
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

// apply ensures the jump rules and restores data into f, as a full sync
// of the proxier does.
func apply(t *testing.T, f *iptablestest.Fake, cfg iptables.Config, data []byte) {
	t.Helper()
	ctx := context.Background()
	for _, table := range []string{"mangle", "nat", "filter"} {
		if err := f.EnsureChain(ctx, table, iptables.ChainCanary); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range iptables.JumpRules(cfg) {
		if err := f.EnsureChain(ctx, j.Table, j.Target); err != nil {
			t.Fatal(err)
		}
		if err := f.EnsureRule(ctx, j.Table, j.Chain, j.Args()...); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Restore(ctx, data); err != nil {
		t.Fatalf("restore: %v\n%s", err, data)
	}
}

// kernel returns what the fake kernel holds, parsed by the tracer.
func kernel(t *testing.T, f *iptablestest.Fake) *trace.Ruleset {
	t.Helper()
	var all []byte
	for _, table := range []string{"filter", "nat"} {
		b, err := f.Save(context.Background(), table)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	rs, err := trace.Parse(all)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, all)
	}
	return rs
}

func TestGolden(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			cfg := nodeConfig
			traceEnv := env
			if fx.cfg != nil {
				cfg = *fx.cfg
				traceEnv = trace.Env{LocalAddrs: cfg.NodeIPs}
			}
			tr := quietTracker()
			feed(tr, fx.objects)
			snap, _ := tr.Snapshot()
			rs := iptables.Build(cfg, iptables.Input{Snapshot: snap, Full: true})
			compareGolden(t, filepath.Join("testdata", fx.name+".golden"), rs.Data)

			fake := iptablestest.NewFake()
			apply(t, fake, cfg, rs.Data)
			rules := kernel(t, fake)
			for _, c := range fx.checks {
				t.Run(c.name, func(t *testing.T) {
					e := traceEnv
					e.Recent = c.recent
					res := trace.Trace(rules, c.pkt, e)
					checkOutcomes(t, res, c.want)
				})
			}
		})
	}
}

func checkOutcomes(t *testing.T, res *trace.Result, want []outcome) {
	t.Helper()
	got := res.Outcomes()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		g, w := got[i], want[i]
		ok = g.Verdict == w.verdict && g.Masquerade == w.masq && math.Abs(g.Probability-w.p) < 1e-6 &&
			(w.verdict != "ACCEPT" || g.Dst.String() == w.dst)
	}
	if !ok || len(res.Warnings) > 0 {
		var b strings.Builder
		res.Write(&b)
		t.Errorf("got %+v\nwant %+v\n%s", got, want, b.String())
	}
}

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
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
		t.Errorf("%s differs from the generated rules (go test -update rewrites it):\n%s", path, lineDiff(string(want), string(got)))
	}
}

// lineDiff lists the lines only in want (-) or only in got (+).
func lineDiff(want, got string) string {
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
