package ipvs

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/ipset"
	utiliptables "github.com/svcnet/svcnet/internal/iptables"
	kipvs "github.com/svcnet/svcnet/internal/ipvs"
	"github.com/svcnet/svcnet/internal/proxy/trace"
)

// TraceSource is what a trace of the ipvs mode reads: the virtual servers
// with their real servers, kube-ipvs0's addresses, the sets' entries, and
// what the masquerade rule of cluster IPs says.
type TraceSource struct {
	Servers      map[kipvs.Key]kipvs.Service
	Destinations map[kipvs.Key][]kipvs.Destination
	Bound        []netip.Addr
	// Sets by IPv4 name (KUBE-CLUSTER-IP …), entries as ipset writes them.
	Sets map[string]map[string]bool
	// ClusterCIDR is the "! -s" of the cluster-IP masquerade rule (zero:
	// none); MasqueradeAll says that rule has no source condition.
	ClusterCIDR   netip.Prefix
	MasqueradeAll bool
	// LocalAddrs are the node's other addresses (node ports).
	LocalAddrs []netip.Addr
}

// Trace explains what happens to pkt's connection in the ipvs mode: the
// filter that rejects unknown ports of service addresses, the virtual
// server it hits, each real server with its share (by weight; the
// scheduler named), and whether the source is masqueraded.
func Trace(src TraceSource, pkt trace.Packet) *trace.Result {
	res := &trace.Result{Packet: pkt}
	proto := map[string]uint16{"tcp": kipvs.TCP, "udp": kipvs.UDP, "sctp": kipvs.SCTP}[pkt.Proto]
	dst := pkt.Dst.Addr()
	ipPort := dst.String() + "," + pkt.Proto + ":" + strconv.Itoa(int(pkt.Dst.Port()))
	in := func(set, entry string) bool { return src.Sets[set][entry] }
	step := func(table, chain, note string) trace.Step { return trace.Step{Table: table, Chain: chain, Note: note} }

	bound := slices.Contains(src.Bound, dst)
	k := kipvs.Key{Addr: dst, Protocol: proto, Port: pkt.Dst.Port()}
	vs, ok := src.Servers[k]
	if bound && !(in(SetClusterIP, ipPort) || in(SetLoadBalancer, ipPort) || in(SetExternalIP, ipPort) || in(SetExternalIPLocal, ipPort)) {
		res.Paths = []trace.Path{{Probability: 1, Verdict: "REJECT", Steps: []trace.Step{
			step("filter", "KUBE-IPVS-FILTER", fmt.Sprintf("%s is on %s but %s/%d is no service port with endpoints: new connections rejected", dst, DummyLink, pkt.Proto, pkt.Dst.Port()))}}}
		return res
	}
	if !ok {
		res.Paths = []trace.Path{{Probability: 1, Verdict: "ACCEPT", Dst: pkt.Dst, Steps: []trace.Step{
			step("ipvs", "-", "no virtual server for "+k.String()+": not a service, left to the node's routing")}}}
		return res
	}

	// The masquerade decision, as the nat rules make it before IPVS.
	var why string
	masq := false
	switch {
	case pkt.Src.IsLoopback():
	case in(SetLoadBalancer, ipPort):
		masq, why = !in(SetLoadBalancerLocal, ipPort), "KUBE-LOAD-BALANCER"
		if !masq {
			why = "KUBE-LOAD-BALANCER-LOCAL: Local policy, source kept"
		}
	case in(SetClusterIP, ipPort):
		masq = src.MasqueradeAll || (src.ClusterCIDR.IsValid() && !src.ClusterCIDR.Contains(pkt.Src))
		why = "KUBE-CLUSTER-IP"
		if src.ClusterCIDR.IsValid() && !src.MasqueradeAll {
			why += fmt.Sprintf(", source %s the cluster CIDR %s", map[bool]string{true: "outside", false: "inside"}[masq], src.ClusterCIDR)
		}
	case in(SetExternalIP, ipPort):
		masq, why = true, "KUBE-EXTERNAL-IP"
	case in(SetExternalIPLocal, ipPort):
		why = "KUBE-EXTERNAL-IP-LOCAL: Local policy, source kept"
	case slices.Contains(src.LocalAddrs, dst):
		port := strconv.Itoa(int(pkt.Dst.Port()))
		set, local := SetNodePortTCP, SetNodePortLocalTCP
		if pkt.Proto == "udp" {
			set, local = SetNodePortUDP, SetNodePortLocalUDP
		}
		masq, why = in(set, port) && !in(local, port), "KUBE-NODE-PORT"
		if in(local, port) {
			why = "KUBE-NODE-PORT, Local policy: source kept"
		}
	}
	head := []trace.Step{step("nat", "KUBE-SERVICES", "matched "+why)}
	sched := vs.Scheduler
	if vs.Flags&kipvs.FlagPersistent != 0 {
		sched += fmt.Sprintf(", persistent %d s (ClientIP affinity: a client keeps its first real server)", vs.Timeout)
	}
	head = append(head, step("ipvs", fmt.Sprintf("%s %s", kipvs.ProtocolName(proto), pkt.Dst), "virtual server, scheduler "+sched))

	dests := src.Destinations[k]
	total := 0
	for _, d := range dests {
		total += d.Weight
	}
	if total == 0 {
		res.Paths = []trace.Path{{Probability: 1, Verdict: "DROP", Steps: append(head,
			step("ipvs", "-", "no real server with a weight above 0: dropped (Local policy without a local endpoint, or every endpoint draining)"))}}
		return res
	}
	for _, d := range dests {
		if d.Weight == 0 {
			continue
		}
		m := masq
		note := fmt.Sprintf("real server %s weight %d of %d, masquerade forwarding", d.AddrPort(), d.Weight, total)
		if in(SetLoopBack, d.Addr.String()+","+pkt.Proto+":"+strconv.Itoa(int(d.Port))+","+pkt.Src.String()) {
			m, note = true, note+"; the pod reaches itself: KUBE-LOOP-BACK masquerades"
		}
		res.Paths = append(res.Paths, trace.Path{Probability: float64(d.Weight) / float64(total), Verdict: "ACCEPT", Dst: d.AddrPort(), DNAT: true, Masquerade: m,
			Steps: append(slices.Clone(head), step("ipvs", fmt.Sprintf("%s %s", kipvs.ProtocolName(proto), pkt.Dst), note))})
	}
	if strings.HasPrefix(vs.Scheduler, "sh") || vs.Flags&kipvs.FlagPersistent != 0 {
		res.Warnings = append(res.Warnings, "the shares are over clients: one client always reaches the same real server")
	}
	return res
}

// notSource is the "! -s CIDR" of a rule, wherever iptables-save puts it.
var notSource = regexp.MustCompile(`! -s (\S+)`)

// LiveSource reads the namespace's IPVS, sets, kube-ipvs0 and rules.
func LiveSource(ctx context.Context, h *kipvs.Handle, sets *ipset.Runner, ex utiliptables.Executor, links Links, family v1.IPFamily) (TraceSource, error) {
	src := TraceSource{Servers: map[kipvs.Key]kipvs.Service{}, Destinations: map[kipvs.Key][]kipvs.Destination{}, Sets: map[string]map[string]bool{}}
	svcs, err := h.Services()
	if err != nil {
		return src, err
	}
	for _, s := range svcs {
		src.Servers[s.Key()] = s
		ds, err := h.Destinations(s)
		if err != nil {
			return src, err
		}
		src.Destinations[s.Key()] = ds
	}
	if src.Bound, err = links.Addresses(DummyLink, family); err != nil {
		return src, fmt.Errorf("no %s here: is this node in the ipvs mode? %w", DummyLink, err)
	}
	if src.LocalAddrs, err = links.OtherAddresses(DummyLink, family); err != nil {
		return src, err
	}
	for _, spec := range setSpecs {
		entries, err := sets.Entries(ctx, SetName(spec.name, family))
		if err != nil {
			return src, err
		}
		m := map[string]bool{}
		for _, e := range entries {
			m[e] = true
		}
		src.Sets[spec.name] = m
	}
	nat, err := ex.Save(ctx, "nat")
	if err != nil {
		return src, err
	}
	for _, l := range strings.Split(string(nat), "\n") {
		if !strings.HasPrefix(l, "-A KUBE-SERVICES ") || !strings.Contains(l, SetName(SetClusterIP, family)+" dst,dst") ||
			!strings.HasSuffix(l, "-j KUBE-MARK-MASQ") {
			continue
		}
		m := notSource.FindStringSubmatch(l)
		if m == nil {
			src.MasqueradeAll = true
		} else if p, err := netip.ParsePrefix(m[1]); err == nil {
			src.ClusterCIDR = p
		}
	}
	return src, nil
}
