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
	// Lookup finds the service entry at k, its backend set and flags.
	Lookup(k bpflb.ServiceKey) (TargetName, Target, bpflb.Flags, bool)
}

// Lookup makes a Table a Source.
func (t Table) Lookup(k bpflb.ServiceKey) (TargetName, Target, bpflb.Flags, bool) {
	n, ok := t.Keys[k]
	if !ok {
		return TargetName{}, Target{}, 0, false
	}
	return n, t.Targets[n], t.Flags[k], true
}

// DumpSource makes maps read from the kernel a Source: what `svcnet
// proxy trace` reads of a running proxy.
func DumpSource(d bpflb.Dump) Source { return dumpSource(d) }

type dumpSource bpflb.Dump

func (d dumpSource) Lookup(k bpflb.ServiceKey) (TargetName, Target, bpflb.Flags, bool) {
	svc, ok := d.Services[k]
	if !ok {
		return TargetName{}, Target{}, 0, false
	}
	t := Target{Verdict: svc.Verdict, Affinity: svc.Affinity, Ranges: d.Ranges[svc.ID]}
	for i := range int(svc.Count) {
		t.Backends = append(t.Backends, d.Backends[bpflb.BackendKey{ID: svc.ID, Slot: uint16(i), Gen: svc.Gen}])
	}
	return TargetName{ID: svc.ID}, t, svc.Flags, true
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

// The tracer's names for where a connect or packet is translated.
const (
	traceHook       = "cgroup connect"
	tracePacketHook = "tc ingress from_net"
	traceService    = "map services"
)

// Trace explains what the programs do with a client's connection: the
// service entry it finds, each backend with its probability, the
// translation, masquerading. A pod's or a node process's connect is
// translated at the socket; a packet from outside the node (not from the
// node, not from the pod network) by the tc program on the node's link.
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
	proto, ok := protoNumber(p.Proto)
	if !ok {
		res.Warnings = append(res.Warnings, "unknown protocol "+p.Proto)
		return untranslated("unknown protocol")
	}
	key := bpflb.ServiceKey{Addr: p.Dst.Addr(), Port: p.Dst.Port(), Proto: proto}
	outside := !p.Local && !env.ClusterCIDR.Contains(p.Src)
	if outside {
		// A packet from outside the node meets the tc program on the
		// node's link.
		hook = tracePacketHook
		key.Scope = bpflb.Packet
	}
	name, t, flags, ok := src.Lookup(key)
	if !ok {
		return untranslated(fmt.Sprintf("no service entry for %s: not translated", key))
	}
	found := trace.Step{Table: "bpf", Chain: traceService, Note: fmt.Sprintf("%s -> %s", key, name)}
	if flags&bpflb.Ranged != 0 && !slices.ContainsFunc(t.Ranges, func(r netip.Prefix) bool { return r.Contains(p.Src) }) {
		res.Paths = append(res.Paths, trace.Path{Probability: 1, Verdict: "DROP",
			Steps: []trace.Step{found, {Table: "bpf", Chain: "map ranges", Note: fmt.Sprintf("%s is in none of %v: dropped", p.Src, t.Ranges)}}})
		return res
	}
	masq := flags&bpflb.Masquerade != 0
	if outside && len(t.Backends) == 0 {
		if t.Verdict == bpflb.Drop {
			res.Paths = append(res.Paths, trace.Path{Probability: 1, Verdict: "DROP",
				Steps: []trace.Step{found, {Table: "bpf", Chain: hook, Note: "no endpoint on this node (Local policy): dropped"}}})
		} else {
			res.Paths = append(res.Paths, trace.Path{Probability: 1, Verdict: "REJECT",
				Steps: []trace.Step{found, {Table: "bpf", Chain: hook, Note: "no endpoint: passed untranslated; the node's stack refuses it (no socket listens)"}}})
		}
		return res
	}
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
		res.Paths = append(res.Paths, trace.Path{Probability: 1, Verdict: "ACCEPT", Dst: b, DNAT: true, Masquerade: masq,
			Steps: []trace.Step{found, {Table: "bpf", Chain: "map affinity",
				Note: fmt.Sprintf("the client's network namespace holds %s (ClientIP affinity, %ds)", b, t.Affinity)}}})
		return res
	}
	share := func(int) float64 { return 1 / float64(len(t.Backends)) }
	how := "at random"
	if outside && flags&bpflb.Maglev != 0 && t.Affinity == 0 {
		// The flow's hash picks an entry of the set's Maglev table.
		count := make([]int, len(t.Backends))
		for _, s := range maglevTable(t.Backends) {
			count[s]++
		}
		share = func(i int) float64 { return float64(count[i]) / MaglevSize }
		how = "by the flow's hash in the Maglev table"
	}
	for i, b := range t.Backends {
		pr := share(i)
		note := fmt.Sprintf("slot %d of %d, %s: %s, probability %.4f", i, len(t.Backends), how, b, pr)
		if t.Affinity > 0 {
			note += fmt.Sprintf("; remembered for the client's network namespace for %ds", t.Affinity)
		}
		if masq {
			note += "; masqueraded (mark for the fixed nftables rule)"
		}
		res.Paths = append(res.Paths, trace.Path{Probability: pr, Verdict: "ACCEPT", Dst: b, DNAT: true, Masquerade: masq,
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
