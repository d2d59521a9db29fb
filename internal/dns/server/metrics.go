package server

import (
	"errors"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests    *prometheus.CounterVec
	responses   *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	truncated   *prometheus.CounterVec
	dropped     prometheus.Counter
	autopath    prometheus.Counter
	programming prometheus.Histogram
	updates     prometheus.Counter
	synced      prometheus.Gauge
	services    prometheus.Gauge
}

// The names follow CoreDNS's (coredns_dns_requests_total and so on) under
// svcnet_dns_, so existing dashboards and alerts translate directly.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svcnet_dns_requests_total",
			Help: "Queries received, by transport and query type.",
		}, []string{"proto", "type"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svcnet_dns_responses_total",
			Help: "Responses sent, by query type, rcode and source (zone, forward, autopath, invalid).",
		}, []string{"type", "rcode", "source"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "svcnet_dns_request_duration_seconds",
			Help:    "Time from reading a query to having its response, by source.",
			Buckets: prometheus.ExponentialBuckets(0.00001, 2, 20), // 10µs .. 5s
		}, []string{"source"}),
		truncated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svcnet_dns_truncated_responses_total",
			Help: "Responses sent with TC set because they did not fit the client's buffer.",
		}, []string{"proto"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svcnet_dns_dropped_packets_total",
			Help: "Packets not answered: shorter than a header, or responses.",
		}),
		autopath: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svcnet_dns_autopath_success_total",
			Help: "Queries answered from a search-path expansion on the server.",
		}),
		programming: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "svcnet_dns_programming_duration_seconds",
			Help:    "Time from an API change to the zone answering with it.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1ms .. 33s
		}),
		updates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svcnet_dns_zone_updates_total",
			Help: "Zone snapshots swapped in.",
		}),
		synced: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svcnet_dns_zone_synced",
			Help: "1 once the zone is served from synced informers.",
		}),
		services: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svcnet_dns_zone_services",
			Help: "Services in the current zone snapshot.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.requests, m.responses, m.duration, m.truncated, m.dropped,
		m.autopath, m.programming, m.updates, m.synced, m.services} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}

// typeLabel keeps the type label to a fixed set, so a client cannot grow
// the metric's cardinality by asking for every type number.
func typeLabel(t uint16) string {
	switch t {
	case dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeCNAME, dns.TypeTXT, dns.TypeMX,
		dns.TypeNS, dns.TypeSOA, dns.TypeANY, dns.TypeHTTPS, dns.TypeSVCB, dns.TypeCAA, dns.TypeDS,
		dns.TypeDNSKEY, dns.TypeAXFR, dns.TypeIXFR:
		return dns.TypeToString[t]
	}
	return "other"
}

func rcodeLabel(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return "other"
}
