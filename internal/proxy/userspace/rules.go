package userspace

import (
	"bytes"
	"context"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// The chains of the userspace mode, in kube-proxy's names: CONTAINER
// chains hang off PREROUTING (traffic from pods and from outside), HOST
// chains off OUTPUT (the node's own traffic).
const (
	ChainPortalsContainer  = "KUBE-PORTALS-CONTAINER"
	ChainPortalsHost       = "KUBE-PORTALS-HOST"
	ChainNodePortContainer = "KUBE-NODEPORT-CONTAINER"
	ChainNodePortHost      = "KUBE-NODEPORT-HOST"
)

// Chains lists them.
var Chains = []string{ChainPortalsContainer, ChainPortalsHost, ChainNodePortContainer, ChainNodePortHost}

// JumpRules link the built-in chains to ours.
func JumpRules() []iptables.JumpRule {
	return []iptables.JumpRule{
		{Table: "nat", Chain: "PREROUTING", Target: ChainPortalsContainer, Comment: "handle ClusterIPs; NOTE: this must be before the NodePort rules"},
		{Table: "nat", Chain: "OUTPUT", Target: ChainPortalsHost, Comment: "handle ClusterIPs; NOTE: this must be before the NodePort rules"},
		{Table: "nat", Chain: "PREROUTING", Target: ChainNodePortContainer, Extra: []string{"-m", "addrtype", "--dst-type", "LOCAL"},
			Comment: "handle service NodePorts; NOTE: this must be the last rule in the chain"},
		{Table: "nat", Chain: "OUTPUT", Target: ChainNodePortHost, Extra: []string{"-m", "addrtype", "--dst-type", "LOCAL"},
			Comment: "handle service NodePorts; NOTE: this must be the last rule in the chain"},
	}
}

// Portal is traffic redirected to one proxy socket.
type Portal struct {
	Name     svcstate.ServicePortName
	Protocol string       // tcp or udp
	Addrs    []netip.Addr // cluster, external and load-balancer IPs captured
	Port     int          // the service port on Addrs
	NodePort int          // 0: none
	// ProxyPort is the proxy socket's port.
	ProxyPort int
}

// BuildRules returns the iptables-restore input (for --noflush) that
// makes the userspace chains redirect exactly the portals, and the
// number of rules in it. nodePortAddrs limits node ports to those
// addresses; empty means every local one.
func BuildRules(portals []Portal, nodePortAddrs []netip.Addr) ([]byte, int) {
	var b bytes.Buffer
	n := 0
	rule := func(chain string, words ...string) {
		b.WriteString("-A " + chain + " " + strings.Join(words, " ") + "\n")
		n++
	}
	b.WriteString("*nat\n")
	for _, c := range Chains {
		b.WriteString(":" + c + " - [0:0]\n")
	}
	for _, p := range portals {
		comment := []string{"-m", "comment", "--comment", `"` + p.Name.String() + `"`}
		to := []string{"-j", "REDIRECT", "--to-ports", strconv.Itoa(p.ProxyPort)}
		match := []string{"-m", p.Protocol, "-p", p.Protocol}
		for _, a := range p.Addrs {
			args := joinAll(comment, match, []string{"-d", netip.PrefixFrom(a, a.BitLen()).String(), "--dport", strconv.Itoa(p.Port)}, to)
			rule(ChainPortalsContainer, args...)
			rule(ChainPortalsHost, args...)
		}
		if p.NodePort == 0 {
			continue
		}
		dport := []string{"--dport", strconv.Itoa(p.NodePort)}
		if len(nodePortAddrs) == 0 {
			args := joinAll(comment, match, dport, to)
			rule(ChainNodePortContainer, args...)
			rule(ChainNodePortHost, args...)
			continue
		}
		for _, a := range nodePortAddrs {
			args := joinAll(comment, match, []string{"-d", netip.PrefixFrom(a, a.BitLen()).String()}, dport, to)
			rule(ChainNodePortContainer, args...)
			rule(ChainNodePortHost, args...)
		}
	}
	b.WriteString("COMMIT\n")
	return b.Bytes(), n
}

func joinAll(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Owned is everything the userspace mode writes in iptables.
func Owned() *iptables.Owned {
	return &iptables.Owned{Jumps: JumpRules(), Chains: map[string]func(string) bool{
		"nat": func(c string) bool { return slices.Contains(Chains, c) },
	}}
}

// Cleanup removes the userspace mode's rules and chains.
func Cleanup(ctx context.Context, ex iptables.Executor) error {
	return iptables.Remove(ctx, ex, Owned(), nil)
}
