package forward

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	healthy       *prometheus.GaugeVec
	probeFailures *prometheus.CounterVec
	cacheHits     prometheus.Counter
	cacheMisses   prometheus.Counter
}

// newMetrics mirrors the names of CoreDNS's forward and cache plugins
// under svcnet_dns_, so existing dashboards translate directly.
func newMetrics(reg prometheus.Registerer, entries func() int) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svcnet_dns_forward_requests_total",
			Help: "Queries sent to upstream servers, by upstream and rcode of the answer (error when none came).",
		}, []string{"upstream", "rcode"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "svcnet_dns_forward_request_duration_seconds",
			Help:    "Time an upstream took to answer, including the TCP retry.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16),
		}, []string{"upstream"}),
		healthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "svcnet_dns_forward_upstream_healthy",
			Help: "1 while an upstream is used, 0 while it is marked down and probed.",
		}, []string{"upstream"}),
		probeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svcnet_dns_forward_healthcheck_failures_total",
			Help: "Health probes of down upstreams that got no answer.",
		}, []string{"upstream"}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svcnet_dns_cache_hits_total",
			Help: "Outside questions answered from the cache.",
		}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svcnet_dns_cache_misses_total",
			Help: "Outside questions the cache could not answer.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	gauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "svcnet_dns_cache_entries",
		Help: "Answers in the caches.",
	}, func() float64 { return float64(entries()) })
	var errs []error
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.healthy, m.probeFailures, m.cacheHits, m.cacheMisses, gauge} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}
