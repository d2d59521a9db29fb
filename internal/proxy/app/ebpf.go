package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcnet/svcnet/internal/bpflb"
	ebpfproxy "github.com/svcnet/svcnet/internal/proxy/ebpf"
)

// ebpfSizes bound the ebpf mode's maps: room for 100,000 Services with a
// few addresses and ten endpoints each. The hash maps take memory as
// they fill; the counters (16 bytes per id) and the least-recently-used
// ones are made whole.
var ebpfSizes = bpflb.Sizes{Services: 1 << 20, IDs: 1 << 18, Backends: 1 << 21, Sockets: 1 << 18, Affinities: 1 << 16}

// ebpfSupported loads the programs once, with the smallest maps: a
// kernel without cgroup v2 socket hooks, or without a helper they call,
// refuses them, and the mode says so at start.
func ebpfSupported() error {
	lb, err := bpflb.Load(bpflb.Sizes{Services: 1, IDs: 1, Backends: 1, Sockets: 1, Affinities: 1})
	if err != nil {
		return err
	}
	return lb.Close()
}

func startEBPF(d *deps) (syncer, error) {
	k := d.shared.ebpf
	if k == nil {
		if err := bpflb.CheckCgroup(d.opts.EBPFCgroup); err != nil {
			return nil, err
		}
		lb, err := bpflb.Load(ebpfSizes)
		if err != nil {
			return nil, err
		}
		go func() { <-d.ctx.Done(); lb.Close() }()
		if err := lb.Attach(d.opts.EBPFCgroup); err != nil {
			return nil, err
		}
		d.logger.Info("ebpf programs attached", "cgroup", d.opts.EBPFCgroup)
		k = ebpfproxy.NewKernel(lb, func() (bool, error) { return lb.Attached(d.opts.EBPFCgroup) })
		d.shared.ebpf = k
		if err := d.register(ebpfCollector{k}); err != nil {
			return nil, err
		}
	}
	return ebpfproxy.NewProxier(ebpfproxy.ProxierConfig{
		Rules:  ebpfproxy.Config{NodeConfig: d.node},
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
