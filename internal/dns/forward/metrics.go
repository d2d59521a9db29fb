package forward

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcnet/svcnet/internal/prom"
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
		requests: prom.CounterVec("svcnet_dns_forward_requests_total",
			"Queries sent to upstream servers, by upstream and rcode of the answer (error when none came).", "upstream", "rcode"),
		duration: prom.HistogramVec("svcnet_dns_forward_request_duration_seconds",
			"Time an upstream took to answer, including the TCP retry.", prometheus.ExponentialBuckets(0.00025, 2, 16), "upstream"),
		healthy: prom.GaugeVec("svcnet_dns_forward_upstream_healthy",
			"1 while an upstream is used, 0 while it is marked down and probed.", "upstream"),
		probeFailures: prom.CounterVec("svcnet_dns_forward_healthcheck_failures_total",
			"Health probes of down upstreams that got no answer.", "upstream"),
		cacheHits:   prom.Counter("svcnet_dns_cache_hits_total", "Outside questions answered from the cache."),
		cacheMisses: prom.Counter("svcnet_dns_cache_misses_total", "Outside questions the cache could not answer."),
	}
	gauge := prom.GaugeFunc("svcnet_dns_cache_entries", "Answers in the caches.", func() float64 { return float64(entries()) })
	return m, prom.Register(reg, m.requests, m.duration, m.healthy, m.probeFailures, m.cacheHits, m.cacheMisses, gauge)
}
