// Package cluster is `svcnet up`: a Kubernetes cluster on one Linux
// machine. Nodes, pods, an underlay network, an outside client and an edge
// load balancer are network namespaces; the control plane runs as
// processes; everything is named svcnet-<cluster>-… and `svcnet down`
// removes it, also after a crash.
package cluster

import (
	"fmt"
	"net/netip"
	"regexp"
)

// Plan is the addressing of one cluster. All of it lives inside the
// cluster's own namespaces, so clusters side by side may use the same
// addresses, and none of it is ever configured in the host's namespace.
type Plan struct {
	Name string
	// Underlay is the network connecting the nodes, the client, the edge
	// and the control plane; the API server listens on its gateway.
	Underlay netip.Prefix
	Gateway  netip.Addr // the underlay bridge; API server, routes to pods
	Client   netip.Addr // the outside client
	Edge     netip.Addr // the edge load balancer host
	// LBPool are the LoadBalancer addresses the edge owns.
	LBPool      string
	ClusterCIDR netip.Prefix
	ServiceCIDR netip.Prefix
	Nodes       []NodePlan
	// ControlPlanes are the hosts of a highly available control plane
	// (an etcd member, an API server and a controller manager each); none
	// when one API server with embedded etcd runs on the host.
	ControlPlanes []ControlPlanePlan
}

// ControlPlanePlan is one control-plane host.
type ControlPlanePlan struct {
	Name  string // etcd member name, cp-1 …
	Netns string
	IP    netip.Addr // on the underlay
	Port  string     // its veth in the underlay namespace
}

// MaxControlPlanes bounds --control-planes.
const MaxControlPlanes = 7

// WithControlPlanes lays out n control-plane hosts at 172.18.1.11, .12 …
// of the underlay, away from the nodes' 172.18.0.11 …; n of 1 is the
// single API server on the host.
func (p *Plan) WithControlPlanes(n int) (*Plan, error) {
	if n < 1 || n > MaxControlPlanes || (n > 1 && n%2 == 0) {
		return nil, fmt.Errorf("--control-planes %d: 1, or an odd number up to %d (etcd needs a majority: 3 members survive the loss of one)", n, MaxControlPlanes)
	}
	p.ControlPlanes = nil
	if n == 1 {
		return p, nil
	}
	for i := 1; i <= n; i++ {
		p.ControlPlanes = append(p.ControlPlanes, ControlPlanePlan{
			Name:  fmt.Sprintf("cp-%d", i),
			Netns: fmt.Sprintf("svcnet-%s-cp-%d", p.Name, i),
			IP:    netip.AddrFrom4([4]byte{172, 18, 1, byte(10 + i)}),
			Port:  fmt.Sprintf("cp%d", i),
		})
	}
	return p, nil
}

// HA reports whether the control plane is several hosts.
func (p *Plan) HA() bool { return len(p.ControlPlanes) > 0 }

// APIAddress is where the cluster's components reach the API: the edge
// load balancer in front of the control-plane hosts, else the API
// server's listener on the underlay's gateway.
func (p *Plan) APIAddress() netip.AddrPort {
	if p.HA() {
		return netip.AddrPortFrom(p.Edge, APIPortInCluster)
	}
	return netip.AddrPortFrom(p.Gateway, APIPortInCluster)
}

// NodePlan is one node.
type NodePlan struct {
	Name    string // Node object name
	Netns   string
	IP      netip.Addr // on the underlay
	Port    string     // its veth in the underlay namespace
	PodCIDR netip.Prefix
	PodGW   netip.Addr // the pod bridge's address
}

var clusterName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,19}$`)

// NewPlan lays out a cluster of n nodes.
func NewPlan(name string, nodes int, clusterCIDR, serviceCIDR string) (*Plan, error) {
	if !clusterName.MatchString(name) {
		return nil, fmt.Errorf("cluster name %q: use up to 20 lower-case letters, digits and '-', starting with a letter", name)
	}
	if nodes < 1 || nodes > 50 {
		return nil, fmt.Errorf("--nodes %d: between 1 and 50", nodes)
	}
	cc, err := netip.ParsePrefix(clusterCIDR)
	if err != nil || !cc.Addr().Is4() || cc.Bits() > 16 {
		return nil, fmt.Errorf("--cluster-cidr %q: want an IPv4 CIDR of /16 or larger (one /24 per node)", clusterCIDR)
	}
	sc, err := netip.ParsePrefix(serviceCIDR)
	if err != nil {
		return nil, fmt.Errorf("--service-cluster-ip-range %q: %w", serviceCIDR, err)
	}
	p := &Plan{
		Name:        name,
		Underlay:    netip.MustParsePrefix("172.18.0.0/16"),
		Gateway:     netip.MustParseAddr("172.18.0.1"),
		Client:      netip.MustParseAddr("172.18.0.2"),
		Edge:        netip.MustParseAddr("172.18.0.3"),
		LBPool:      "172.18.255.200-172.18.255.250",
		ClusterCIDR: cc.Masked(),
		ServiceCIDR: sc.Masked(),
	}
	if p.ClusterCIDR.Overlaps(p.Underlay) || p.ServiceCIDR.Overlaps(p.Underlay) || p.ClusterCIDR.Overlaps(p.ServiceCIDR) {
		return nil, fmt.Errorf("cluster CIDR %s, service CIDR %s and the underlay %s must not overlap", p.ClusterCIDR, p.ServiceCIDR, p.Underlay)
	}
	base := p.ClusterCIDR.Addr().As4()
	for i := 1; i <= nodes; i++ {
		pod := netip.PrefixFrom(netip.AddrFrom4([4]byte{base[0], base[1], byte(i), 0}), 24)
		p.Nodes = append(p.Nodes, NodePlan{
			Name:    fmt.Sprintf("node-%d", i),
			Netns:   fmt.Sprintf("svcnet-%s-node-%d", name, i),
			IP:      netip.AddrFrom4([4]byte{172, 18, 0, byte(10 + i)}),
			Port:    fmt.Sprintf("node%d", i),
			PodCIDR: pod,
			PodGW:   pod.Addr().Next(),
		})
	}
	return p, nil
}

// Namespace names of the cluster's hosts.
func (p *Plan) UnderlayNetns() string { return "svcnet-" + p.Name + "-net" }
func (p *Plan) ClientNetns() string   { return "svcnet-" + p.Name + "-client" }
func (p *Plan) EdgeNetns() string     { return "svcnet-" + p.Name + "-edge" }

// Prefix is what every namespace of the cluster is named with.
func (p *Plan) Prefix() string { return NetnsPrefix(p.Name) }

// NetnsPrefix is the name prefix of cluster name's namespaces.
func NetnsPrefix(name string) string { return "svcnet-" + name + "-" }

// Node returns the plan of the named node.
func (p *Plan) Node(name string) (NodePlan, bool) {
	for _, n := range p.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return NodePlan{}, false
}
