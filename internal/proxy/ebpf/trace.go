package ebpf

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/bpflb"
	"github.com/svcnet/svcnet/internal/proxy/trace"
)

// Source is what a trace reads: the maps' entries, as a Table has them or
// as read back from the kernel.
type Source interface {
	// Lookup finds the service entry at k and its backend set.
	Lookup(k bpflb.ServiceKey) (TargetName, Target, bool)
}

// Lookup makes a Table a Source.
func (t Table) Lookup(k bpflb.ServiceKey) (TargetName, Target, bool) {
	n, ok := t.Keys[k]
	if !ok {
		return TargetName{}, Target{}, false
	}
	return n, t.Targets[n], true
}

// Env is what a trace knows of the node besides the maps.
type Env struct {
	// ClusterCIDR holds the pods: their connects go through the
	// programs.
	ClusterCIDR netip.Prefix
	// Sticky is the backend a ClientIP affinity already holds for the
	// packet's source, per backend set.
	Sticky map[TargetName]netip.AddrPort
}

// The tracer's names for where a connect is translated.
const (
	traceHook    = "cgroup connect"
	traceService = "map services"
)

// Trace explains what the programs do with a client's connection: the
// service entry it finds, each backend with its probability, the
// translation. Only a pod's or a node process's connect passes the
// programs; a packet from outside the node is reported untranslated with
// a warning (packet-level load balancing is not built yet).
func Trace(src Source, p trace.Packet, env Env) *trace.Result {
	p.Proto = strings.ToLower(p.Proto)
	res := &trace.Result{Packet: p}
	hook := traceHook + "4"
	if p.Dst.Addr().Is6() {
		hook = traceHook + "6"
	}
	untranslated := func(note string) *trace.Result {
		res.Paths = append(res.Paths, trace.Path{Probability: 1, Verdict: "ACCEPT", Dst: p.Dst,
			Steps: []trace.Step{{Table: "bpf", Chain: hook, Note: note}}})
		return res
	}
	if !p.Local && !env.ClusterCIDR.Contains(p.Src) {
		res.Warnings = append(res.Warnings, "the ebpf mode translates the connects of the node's pods and processes; "+
			"packets from outside the node (packet-level load balancing) are not handled yet")
		return untranslated("not a socket of the node: not seen by the programs")
	}
	proto, ok := protoNumber(p.Proto)
	if !ok {
		res.Warnings = append(res.Warnings, "unknown protocol "+p.Proto)
		return untranslated("unknown protocol")
	}
	key := bpflb.ServiceKey{Addr: p.Dst.Addr(), Port: p.Dst.Port(), Proto: proto}
	name, t, ok := src.Lookup(key)
	if !ok {
		return untranslated(fmt.Sprintf("no service entry for %s: not translated", key))
	}
	found := trace.Step{Table: "bpf", Chain: traceService, Note: fmt.Sprintf("%s -> %s", key, name)}
	if len(t.Backends) == 0 {
		verdict, why := "REJECT", "no endpoint: the connect fails with ECONNREFUSED"
		if t.Verdict == bpflb.Drop {
			verdict, why = "DROP", "refused to this node's clients: the connect fails with EPERM"
		}
		res.Paths = append(res.Paths, trace.Path{Probability: 1, Verdict: verdict,
			Steps: []trace.Step{found, {Table: "bpf", Chain: hook, Note: why}}})
		return res
	}
	if b, ok := env.Sticky[name]; ok && t.Affinity > 0 && slices.Contains(t.Backends, b) {
		res.Paths = append(res.Paths, trace.Path{Probability: 1, Verdict: "ACCEPT", Dst: b, DNAT: true,
			Steps: []trace.Step{found, {Table: "bpf", Chain: "map affinity",
				Note: fmt.Sprintf("the client's network namespace holds %s (ClientIP affinity, %ds)", b, t.Affinity)}}})
		return res
	}
	pr := 1 / float64(len(t.Backends))
	for i, b := range t.Backends {
		note := fmt.Sprintf("slot %d of %d: %s, probability %.4f", i, len(t.Backends), b, pr)
		if t.Affinity > 0 {
			note += fmt.Sprintf("; remembered for the client's network namespace for %ds", t.Affinity)
		}
		res.Paths = append(res.Paths, trace.Path{Probability: pr, Verdict: "ACCEPT", Dst: b, DNAT: true,
			Steps: []trace.Step{found, {Table: "bpf", Chain: "map backends", Note: note}}})
	}
	return res
}

func protoNumber(p string) (uint8, bool) {
	switch p {
	case "tcp":
		return unix.IPPROTO_TCP, true
	case "udp":
		return unix.IPPROTO_UDP, true
	case "sctp":
		return unix.IPPROTO_SCTP, true
	}
	return 0, false
}
