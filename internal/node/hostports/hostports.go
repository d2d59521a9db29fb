// Package hostports decides the node's rules for containers' hostPorts,
// as the CNI portmap plugin programs them for kubelet: a connection to
// the node's hostPort (on hostIP, when the pod names one) is sent to the
// pod's containerPort. It only writes the iptables-restore input; the
// node agent applies it. Pure, tested without root.
package hostports

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Chains of the node's nat table: DNAT of local destinations, and the
// masquerade that lets the node itself (127.0.0.1) and the pod itself
// (hairpin) reach a pod through its hostPort.
const (
	Chain     = "SVCNET-HOSTPORTS"
	MasqChain = "SVCNET-HOSTPORTS-MASQ"
)

// Mapping is one hostPort of one pod.
type Mapping struct {
	Pod           string // namespace/name, for the rule's comment
	PodIP         netip.Addr
	HostIP        netip.Addr // invalid: every address of the node
	HostPort      int32
	ContainerPort int32
	Protocol      corev1.Protocol
}

// FromPod lists the hostPorts of a pod at podIP. hostNetwork pods listen
// on the node themselves: they need none.
func FromPod(pod *corev1.Pod, podIP netip.Addr) []Mapping {
	if pod.Spec.HostNetwork || !podIP.IsValid() {
		return nil
	}
	var out []Mapping
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		for _, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			m := Mapping{Pod: pod.Namespace + "/" + pod.Name, PodIP: podIP, HostPort: p.HostPort,
				ContainerPort: p.ContainerPort, Protocol: cmp.Or(p.Protocol, corev1.ProtocolTCP)}
			if a, err := netip.ParseAddr(p.HostIP); err == nil && !a.IsUnspecified() {
				m.HostIP = a
			}
			out = append(out, m)
		}
	}
	return out
}

// Rules is the iptables-restore input (for --noflush) that replaces both
// chains with the rules of ms.
func Rules(ms []Mapping) string {
	ms = slices.Clone(ms)
	slices.SortFunc(ms, func(a, b Mapping) int {
		return cmp.Or(cmp.Compare(a.HostPort, b.HostPort), strings.Compare(string(a.Protocol), string(b.Protocol)),
			a.HostIP.Compare(b.HostIP), strings.Compare(a.Pod, b.Pod))
	})
	var b strings.Builder
	fmt.Fprintf(&b, "*nat\n:%s - [0:0]\n:%s - [0:0]\n", Chain, MasqChain)
	for _, m := range ms {
		proto := strings.ToLower(string(m.Protocol))
		dst := ""
		if m.HostIP.IsValid() {
			dst = " -d " + m.HostIP.String()
		}
		comment := fmt.Sprintf("-m comment --comment \"%s hostPort %d\"", m.Pod, m.HostPort)
		fmt.Fprintf(&b, "-A %s -p %s%s --dport %d %s -j DNAT --to-destination %s\n",
			Chain, proto, dst, m.HostPort, comment, netip.AddrPortFrom(m.PodIP, uint16(m.ContainerPort)))
		// From the node's loopback (hostIP 127.0.0.1, or any) and from the
		// pod itself, the reply must come back through the node.
		fmt.Fprintf(&b, "-A %s -p %s -s 127.0.0.0/8 -d %s --dport %d %s -j MASQUERADE\n",
			MasqChain, proto, m.PodIP, m.ContainerPort, comment)
		fmt.Fprintf(&b, "-A %s -p %s -s %s -d %s --dport %d %s -j MASQUERADE\n",
			MasqChain, proto, m.PodIP, m.PodIP, m.ContainerPort, comment)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// Jumps are the rules of the nat table's own chains that lead to the
// two: connections to the node's own addresses, from outside (PREROUTING)
// and from the node (OUTPUT), and every packet leaving (POSTROUTING).
func Jumps() [][]string {
	local := []string{"-m", "addrtype", "--dst-type", "LOCAL", "-m", "comment", "--comment", "svcnet hostPorts", "-j", Chain}
	return [][]string{
		append([]string{"PREROUTING"}, local...),
		append([]string{"OUTPUT"}, local...),
		{"POSTROUTING", "-m", "comment", "--comment", "svcnet hostPorts", "-j", MasqChain},
	}
}
