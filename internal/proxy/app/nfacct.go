package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcnet/svcnet/internal/nfacct"
)

// invalidCounter is kube-proxy's nfacct counter of the packets its
// iptables rules drop as conntrack-invalid.
const invalidCounter = "ct_state_invalid_dropped_pkts"

// Counters are the namespace's nfacct counters.
type Counters interface {
	Ensure(name string) error
	Get(name string) (packets, bytes uint64, err error)
}

type kernelCounters struct{}

func (kernelCounters) Ensure(name string) error                { return nfacct.Ensure(name) }
func (kernelCounters) Get(name string) (uint64, uint64, error) { return nfacct.Get(name) }

// invalidDropped is kube-proxy's metric of that counter, read at each
// scrape.
func invalidDropped(c Counters) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "kubeproxy_iptables_ct_state_invalid_dropped_packets_total",
		Help: "packets dropped by iptables to work around conntrack problems",
	}, func() float64 {
		p, _, err := c.Get(invalidCounter)
		if err != nil {
			return 0
		}
		return float64(p)
	})
}
