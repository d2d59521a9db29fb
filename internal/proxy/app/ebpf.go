package app

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/bpflb"
	nft "github.com/svcnet/svcnet/internal/nftables"
	ebpfproxy "github.com/svcnet/svcnet/internal/proxy/ebpf"
	"github.com/svcnet/svcnet/internal/sockdiag"
)

// ebpfSizes bound the ebpf mode's maps: room for 100,000 Services with a
// few addresses and ten endpoints each. The hash maps take memory as
// they fill; the counters (16 bytes per id) and the least-recently-used
// ones are made whole.
var ebpfSizes = bpflb.Sizes{Services: 1 << 20, IDs: 1 << 18, Backends: 1 << 21, Sockets: 1 << 18, Affinities: 1 << 16,
	Flows: 1 << 18, Ranges: 1 << 16, Maglev: 1 << 17}

// ebpfTable is the ebpf mode's one nftables table per family: a fixed
// rule that masquerades the flows from outside its tc program marks.
const ebpfTable = "svcnet-ebpf"

// ebpfSupported loads a socket program and a packet program with the
// smallest maps: a kernel without cgroup v2 socket hooks or tc programs,
// or without a helper they call, refuses them, and the mode says so at
// start.
func ebpfSupported() error { return bpflb.Check() }

func startEBPF(d *deps) (syncer, error) {
	k := d.shared.ebpf
	if k == nil {
		if err := bpflb.CheckCgroup(d.opts.EBPFCgroup); err != nil {
			return nil, err
		}
		lb, err := bpflb.Load(ebpfSizes, bpflb.Options{MasqueradeMark: 1 << d.node.MasqueradeBit})
		if err != nil {
			return nil, err
		}
		go func() { <-d.ctx.Done(); lb.Close() }()
		if err := lb.Attach(d.opts.EBPFCgroup); err != nil {
			return nil, err
		}
		d.logger.Info("ebpf programs attached", "cgroup", d.opts.EBPFCgroup)
		k = ebpfproxy.NewKernel(lb, func() (bool, error) { return lb.Attached(d.opts.EBPFCgroup) })
		k.Fresh = true
		cgroup, logger := d.opts.EBPFCgroup, d.logger
		k.ForgetUDP = func(backends []netip.AddrPort) error {
			cookies, err := lb.ForgetUDP(backends)
			if err != nil || len(cookies) == 0 {
				return err
			}
			// Only sockets the programs connected to a removed backend:
			// socket cookies are unique on the machine.
			n, err := sockdiag.DestroyInCgroup(cgroup, func(s sockdiag.Socket) bool { return cookies[s.Cookie] })
			if n > 0 {
				logger.Info("destroyed UDP sockets connected to removed endpoints", "sockets", n, "endpoints", len(backends))
			}
			return err
		}
		d.shared.ebpf, d.shared.ebpfLB = k, lb
		if err := d.register(ebpfCollector{k}); err != nil {
			return nil, err
		}
	}
	// Clients outside the node: the tc programs on the links that hold
	// the node's addresses, and the masquerade rule.
	links, err := linksOf(d.node.NodeIPs)
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		if err := d.shared.ebpfLB.AttachLink(l.Attrs().Index); err != nil {
			return nil, err
		}
		d.logger.Info("ebpf packet programs attached", "link", l.Attrs().Name, "ipFamily", string(d.node.Family))
	}
	if err := ebpfMasquerade(d.node.Family, 1<<d.node.MasqueradeBit); err != nil {
		return nil, fmt.Errorf("the ebpf mode's masquerade rule: %w", err)
	}
	return ebpfproxy.NewProxier(ebpfproxy.ProxierConfig{
		Rules:  ebpfproxy.Config{NodeConfig: d.node, Maglev: d.opts.EBPFLBAlgorithm == "maglev"},
		Sync:   d.sync,
		Kernel: k,
	})
}

// ebpfCollector exports the programs' counters per backend set.
type ebpfCollector struct{ k *ebpfproxy.Kernel }

var (
	ebpfTranslatedDesc = prometheus.NewDesc("svcnet_ebpf_connects_translated_total",
		"Connects (and unconnected datagrams) the ebpf mode's programs sent to an endpoint, per service port and scope.",
		[]string{"namespace", "service", "port", "protocol", "scope"}, nil)
	ebpfRefusedDesc = prometheus.NewDesc("svcnet_ebpf_connects_refused_total",
		"Connects the ebpf mode's programs refused for want of an endpoint, per service port and scope.",
		[]string{"namespace", "service", "port", "protocol", "scope"}, nil)
)

func (c ebpfCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- ebpfTranslatedDesc
	ch <- ebpfRefusedDesc
}

func (c ebpfCollector) Collect(ch chan<- prometheus.Metric) {
	for name, s := range c.k.Stats() {
		labels := []string{name.Port.Namespace, name.Port.Name, name.Port.Port, string(name.Port.Protocol), name.Scope.String()}
		ch <- prometheus.MustNewConstMetric(ebpfTranslatedDesc, prometheus.CounterValue, float64(s.Translated), labels...)
		ch <- prometheus.MustNewConstMetric(ebpfRefusedDesc, prometheus.CounterValue, float64(s.Refused), labels...)
	}
}

// linksOf are the links of the calling thread's network namespace that
// hold addrs.
func linksOf(addrs []netip.Addr) ([]netlink.Link, error) {
	list, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	var out []netlink.Link
	seen := map[int]bool{}
	for _, la := range list {
		ip, ok := netip.AddrFromSlice(la.IP)
		if !ok || seen[la.LinkIndex] || !slices.Contains(addrs, ip.Unmap()) {
			continue
		}
		l, err := netlink.LinkByIndex(la.LinkIndex)
		if err != nil {
			return nil, err
		}
		seen[la.LinkIndex] = true
		out = append(out, l)
	}
	return out, nil
}

func nftFamily(f v1.IPFamily) nft.Family {
	if f == v1.IPv6Protocol {
		return nft.IPv6
	}
	return nft.IPv4
}

// ebpfMasquerade writes the fixed masquerade rule of family f: packets
// with mark's bit, marked by the tc program, leave with the node's
// address.
func ebpfMasquerade(f v1.IPFamily, mark uint32) error {
	c, err := nft.Open()
	if err != nil {
		return err
	}
	defer c.Close()
	tx := nft.NewTx(nftFamily(f), ebpfTable)
	tx.AddTable("svcnet's ebpf proxy mode: masquerade the flows from outside its tc program marks")
	tx.AddChain(&nft.Chain{Name: "postrouting", Hook: &nft.Hook{Type: "nat", Hook: "postrouting", Priority: 100}})
	tx.FlushChain("postrouting")
	tx.AddRule("postrouting", nft.R(nft.MatchMarkSet{Mark: mark}, nft.Masquerade{FullyRandom: true}))
	return c.Run(tx)
}

// cleanupEBPF deletes the masquerade tables: all the mode leaves behind
// its process (its programs' links end with it).
func cleanupEBPF() error {
	c, err := nft.Open()
	if err != nil {
		return err
	}
	defer c.Close()
	var errs []error
	for _, f := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		r, err := nft.OpenReader(nftFamily(f), ebpfTable)
		if err != nil {
			return err
		}
		ok, err := r.Exists()
		r.Close()
		if err != nil || !ok {
			errs = append(errs, err)
			continue
		}
		tx := nft.NewTx(nftFamily(f), ebpfTable)
		tx.DeleteTable()
		errs = append(errs, c.Run(tx))
	}
	return errors.Join(errs...)
}
