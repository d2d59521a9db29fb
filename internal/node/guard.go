package node

import (
	"errors"
	"net/netip"
	"os"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/controller/podendpoint"
	nft "github.com/svcnet/svcnet/internal/nftables"
	"golang.org/x/sys/unix"
)

// A serving guard closes the moment a crash hold cannot cover. When a
// server is killed, its listening socket closes as its process exits,
// and the pod's namespace refuses the connections that arrive from then
// on — a TCP reset, ICMP port unreachable for UDP — before the pod's
// shim and then its agent have seen the exit and put the hold in place.
// So while a pod that backs a Service is Ready, a table in its own
// namespace drops its refusals at the ports the Services send it: a
// Ready pod that serves those ports sends none while it serves, and the
// client of one that has just died does what it does for a lost packet
// (TCP sends its SYN again a second later, by which time the hold, then
// the proxies, send it elsewhere). The guard goes when the pod stops
// being Ready, is deleted, or its agent stops; from then on the pod
// refuses as in Kubernetes. Refusals are told apart from the packet
// alone, so no conntrack is needed: a reset that refuses a SYN has
// flags RST and ACK and sequence 0 (a reset that ends a connection
// carries its sequence number); ICMP port unreachable is only ever a
// refusal. ICMP cannot be narrowed to the served UDP ports without
// reading the quoted datagram, so a pod that serves a UDP port drops all
// its port-unreachable answers while it is Ready. Refusals to the pod's
// own address (its loopback traffic) pass.
const servingGuardTable = "svcnet-serving"

// servedPort is a port at which a Service sends the pod connections.
type servedPort struct {
	proto corev1.Protocol
	port  int32
}

// servingGuard is the guard's table for the pod at addr serving ports
// (sorted, without repeats).
func servingGuard(addr netip.Addr, ports []servedPort) *nft.Table {
	f, icmp := nft.IPv4, nft.ICMP
	if addr.Is6() {
		f, icmp = nft.IPv6, nft.ICMPv6
	}
	pod := netip.PrefixFrom(addr, addr.BitLen())
	// Every packet the pod sends passes these rules: each first asks
	// what a served packet fails at once (a reset or an ICMP error), and
	// the addresses last.
	from := func(match ...nft.Stmt) nft.Rule {
		return nft.R(append(match, nft.MatchAddr{Src: true, Prefix: pod}, nft.MatchAddr{Neg: true, Prefix: pod}, nft.Verdict{Kind: nft.Drop})...)
	}
	var rules []nft.Rule
	udp := false
	for _, p := range ports {
		switch p.proto {
		case corev1.ProtocolTCP:
			rules = append(rules, from(nft.MatchProto{Proto: nft.TCP}, nft.MatchTCPRefusal{}, nft.MatchSport{Port: uint16(p.port)}))
		case corev1.ProtocolUDP:
			udp = true
		}
	}
	if udp {
		rules = append(rules, from(nft.MatchProto{Proto: icmp}, nft.MatchPortUnreachable{}))
	}
	return &nft.Table{Family: f, Name: servingGuardTable, Comment: "svcnet: this pod is Ready behind a Service; its refusals of new connections are dropped",
		Chains: []*nft.Chain{{Name: "output", Hook: &nft.Hook{Type: "filter", Hook: "output"}, Rules: rules}}}
}

// Guard puts (or replaces) the serving guard of the pod of uid, whose
// address is addr, for ports.
func (n *PodNetwork) Guard(uid string, addr netip.Addr, ports []servedPort) error {
	tbl := servingGuard(addr, ports)
	return n.nft(uid, func(c *nft.Conn) error {
		tx := nft.NewTx(tbl.Family, tbl.Name)
		tx.Fill(tbl, nft.FillOptions{Replace: true})
		return c.Run(tx)
	})
}

// Unguard removes the serving guard of the pod of uid, if it has one.
func (n *PodNetwork) Unguard(uid string, addr netip.Addr) error {
	f := nft.IPv4
	if addr.Is6() {
		f = nft.IPv6
	}
	err := n.nft(uid, func(c *nft.Conn) error {
		tx := nft.NewTx(f, servingGuardTable)
		tx.DeleteTable()
		return c.Run(tx)
	})
	if errors.Is(err, unix.ENOENT) || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// servedPorts are the ports at which the Services selecting pod send it
// connections (TCP and UDP), sorted.
func (a *Agent) servedPorts(pod *corev1.Pod) []servedPort {
	var ports []servedPort
	for _, s := range a.servicesOf(pod) {
		for i := range s.Spec.Ports {
			sp := &s.Spec.Ports[i]
			if sp.Protocol != corev1.ProtocolTCP && sp.Protocol != corev1.ProtocolUDP {
				continue
			}
			if port, err := podendpoint.FindPort(pod, sp); err == nil {
				ports = append(ports, servedPort{proto: sp.Protocol, port: port})
			}
		}
	}
	slices.SortFunc(ports, func(x, y servedPort) int {
		if x.proto != y.proto {
			if x.proto < y.proto {
				return -1
			}
			return 1
		}
		return int(x.port - y.port)
	})
	return slices.Compact(ports)
}

// syncGuard puts, changes or removes the pod's serving guard as its
// readiness and Services say: guarded while Ready as last computed,
// not being deleted, in a namespace of its own, not opted out of the
// drain (EndpointDrainAnnotation "none"), and served by a Service.
func (w *podWorker) syncGuard() {
	if w.a.net == nil {
		return
	}
	addr := w.sb.IP()
	var want []servedPort
	if w.ready && w.pod.DeletionTimestamp == nil && !w.pod.Spec.HostNetwork && addr.IsValid() &&
		w.pod.Annotations[EndpointDrainAnnotation] != "none" {
		want = w.a.servedPorts(w.pod)
	}
	if w.guarded && slices.Equal(want, w.guard) {
		return
	}
	if len(want) == 0 {
		w.unguard()
		return
	}
	if err := w.a.net.Guard(string(w.uid), addr, want); err != nil {
		w.log().Warn("serving guard", "err", err)
		return
	}
	w.guard, w.guarded, w.guardAddr = want, true, addr
}

// unguard removes the pod's serving guard, if it has one.
func (w *podWorker) unguard() {
	if !w.guarded || w.a.net == nil {
		return
	}
	if err := w.a.net.Unguard(string(w.uid), w.guardAddr); err != nil {
		w.log().Warn("remove serving guard", "err", err)
		return
	}
	w.guard, w.guarded = nil, false
}
