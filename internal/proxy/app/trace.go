package app

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/bpflb"
	"github.com/svcnet/svcnet/internal/ipset"
	utiliptables "github.com/svcnet/svcnet/internal/iptables"
	kipvs "github.com/svcnet/svcnet/internal/ipvs"
	nft "github.com/svcnet/svcnet/internal/nftables"
	ebpfproxy "github.com/svcnet/svcnet/internal/proxy/ebpf"
	ipvsproxy "github.com/svcnet/svcnet/internal/proxy/ipvs"
	"github.com/svcnet/svcnet/internal/proxy/nftables"
	"github.com/svcnet/svcnet/internal/proxy/trace"
)

// TraceOptions are `svcnet proxy trace`'s settings.
type TraceOptions struct {
	Src string // source IP
	Dst string // IP:PORT/PROTO; PROTO defaults to tcp
	// Local traces a packet the node itself sends (nat OUTPUT) rather
	// than one arriving from a pod or the network (nat PREROUTING).
	Local bool
	// File reads iptables-save output from a file ("-": stdin) instead of
	// the namespace's tables.
	File           string
	IPTablesBinary string
	// NodeIPs add to the namespace's own addresses what addrtype LOCAL
	// matches.
	NodeIPs []string
	// Mode is the rules to read: iptables, nftables, ipvs, ebpf, or ""
	// for nftables when its table exists.
	Mode string
	// EBPFCgroup is the group the ebpf mode's programs are attached to
	// (their maps are found through them); ClusterCIDR the pod network,
	// whose sources are traced as a pod's connect rather than as a
	// packet from outside the node.
	EBPFCgroup  string
	ClusterCIDR string
}

// ParsePacket reads --src and --dst.
func (t TraceOptions) ParsePacket() (trace.Packet, error) {
	src, err := netip.ParseAddr(t.Src)
	if err != nil {
		return trace.Packet{}, fmt.Errorf("--src %q: %w", t.Src, err)
	}
	dst, proto, _ := strings.Cut(t.Dst, "/")
	if proto == "" {
		proto = "tcp"
	}
	proto = strings.ToLower(proto)
	if proto != "tcp" && proto != "udp" && proto != "sctp" {
		return trace.Packet{}, fmt.Errorf("--dst %q: protocol %q is not tcp, udp or sctp", t.Dst, proto)
	}
	ap, err := netip.ParseAddrPort(dst)
	if err != nil {
		return trace.Packet{}, fmt.Errorf("--dst %q: want IP:PORT/PROTO: %w", t.Dst, err)
	}
	if src.Is4() != ap.Addr().Is4() {
		return trace.Packet{}, fmt.Errorf("--src %s and --dst %s are of different IP families", src, ap.Addr())
	}
	return trace.Packet{Src: src, SrcPort: 40000, Dst: ap, Proto: proto, Local: t.Local}, nil
}

// ipvsHere reports whether this namespace has the ipvs mode's dummy link.
func ipvsHere(family v1.IPFamily) bool {
	_, err := ipvsproxy.Netlink{}.Addresses(ipvsproxy.DummyLink, family)
	return err == nil
}

// Trace walks a packet through the rules of the namespace it runs in
// (or of a saved dump) and writes the paths it may take.
func Trace(ctx context.Context, t TraceOptions, ex utiliptables.Executor, ifaces Interfaces, w io.Writer) error {
	pkt, err := t.ParsePacket()
	if err != nil {
		return err
	}
	family := v1.IPv4Protocol
	if pkt.Dst.Addr().Is6() {
		family = v1.IPv6Protocol
	}
	var local []netip.Addr
	if t.File == "" {
		if local, err = ifaces.Addrs(family); err != nil {
			return err
		}
	}
	for _, s := range t.NodeIPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return fmt.Errorf("--node-ip %q: %w", s, err)
		}
		if !slices.Contains(local, a) {
			local = append(local, a)
		}
	}
	env := trace.Env{LocalAddrs: local}

	mode := strings.ToLower(t.Mode)
	switch {
	case mode != "" && mode != "iptables" && mode != "nftables" && mode != "ipvs" && mode != "ebpf":
		return fmt.Errorf("--proxy-mode %q: trace reads iptables, nftables, ipvs or ebpf state", t.Mode)
	case (mode == "nftables" || mode == "ipvs" || mode == "ebpf") && t.File != "":
		return fmt.Errorf("--file reads iptables-save dumps; the %s mode's state is traced live", mode)
	case mode == "ebpf" && t.EBPFCgroup == "":
		return fmt.Errorf("--proxy-mode ebpf: --ebpf-cgroup names the group the programs are attached to, through which their maps are found")
	}
	if mode == "ebpf" || t.EBPFCgroup != "" {
		return traceEBPF(t, pkt, w)
	}
	// The ipvs mode, when asked for or when its dummy link is here.
	if t.File == "" && (mode == "ipvs" || (mode == "" && ipvsHere(family))) {
		if err := kipvs.Supported(); err != nil {
			return err
		}
		h, err := kipvs.Open("")
		if err != nil {
			return err
		}
		defer h.Close()
		src, err := ipvsproxy.LiveSource(ctx, h, &ipset.Runner{}, ex, ipvsproxy.Netlink{}, family)
		if err != nil {
			return err
		}
		return ipvsproxy.Trace(src, pkt).Write(w)
	}
	if mode != "iptables" && t.File == "" {
		k, err := nftables.OpenKernel(family)
		if err != nil && mode == "nftables" {
			return err
		}
		exists := false
		if err == nil {
			defer k.Close()
			if exists, err = k.Reader.Exists(); err != nil {
				return err
			}
		}
		if exists {
			fam := nft.IPv4
			if family == v1.IPv6Protocol {
				fam = nft.IPv6
			}
			return nftables.Trace(nftables.LiveSource(k.Reader, fam), pkt, env).Write(w)
		}
		if mode == "nftables" {
			return fmt.Errorf("no table %s kube-proxy in this network namespace", family)
		}
	}

	var dump []byte
	switch t.File {
	case "":
		for _, table := range []string{"filter", "nat"} {
			b, err := ex.Save(ctx, table)
			if err != nil {
				return fmt.Errorf("read the %s table: %w", table, err)
			}
			dump = append(dump, b...)
		}
	case "-":
		if dump, err = io.ReadAll(os.Stdin); err != nil {
			return err
		}
	default:
		if dump, err = os.ReadFile(t.File); err != nil {
			return err
		}
	}
	rs, err := trace.Parse(dump)
	if err != nil {
		return fmt.Errorf("parse rules: %w", err)
	}
	return trace.Trace(rs, pkt, env).Write(w)
}

// traceEBPF traces through the maps of the ebpf mode's programs attached
// to t.EBPFCgroup.
func traceEBPF(t TraceOptions, pkt trace.Packet, w io.Writer) error {
	var env ebpfproxy.Env
	if t.ClusterCIDR != "" {
		p, err := netip.ParsePrefix(t.ClusterCIDR)
		if err != nil {
			return fmt.Errorf("--cluster-cidr %q: %w", t.ClusterCIDR, err)
		}
		env.ClusterCIDR = p
	}
	live, err := bpflb.OpenAttached(t.EBPFCgroup)
	if err != nil {
		return err
	}
	defer live.Close()
	d, err := live.Dump()
	if err != nil {
		return err
	}
	return ebpfproxy.Trace(ebpfproxy.DumpSource(d), pkt, env).Write(w)
}
