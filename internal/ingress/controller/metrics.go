package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcnet/svcnet/internal/prom"
)

type syncMetrics struct {
	syncs    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	latency  prometheus.Histogram
}

func newSyncMetrics(reg prometheus.Registerer) syncMetrics {
	m := syncMetrics{
		syncs: prom.CounterVec("svcnet_ingress_config_syncs_total",
			"Configuration syncs: routes (the table rebuilt from Ingresses) or endpoints (endpoint sets swapped).", "kind"),
		duration: prom.HistogramVec("svcnet_ingress_config_sync_duration_seconds", "Time one sync takes, by kind.",
			prometheus.ExponentialBuckets(0.0001, 2, 16), "kind"), // 0.1 ms .. 3 s
		latency: prom.Histogram("svcnet_ingress_endpoint_programming_latency_seconds",
			"From an endpoint change in the API (the EndpointSlice's last-change-trigger-time, else its arrival) to the proxy using it.",
			prometheus.ExponentialBuckets(0.001, 2, 14)), // 1 ms .. 8 s
	}
	prom.MustRegister(reg, m.syncs, m.duration, m.latency)
	return m
}

func (m syncMetrics) done(kind string, start, trigger time.Time) {
	m.syncs.WithLabelValues(kind).Inc()
	m.duration.WithLabelValues(kind).Observe(time.Since(start).Seconds())
	if !trigger.IsZero() {
		m.latency.Observe(time.Since(trigger).Seconds())
	}
}
