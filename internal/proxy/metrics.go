package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcnet/svcnet/internal/svcstate"
)

// Metrics are the proxy's Prometheus metrics. Names follow kube-proxy's
// where kube-proxy has one, so existing dashboards work; the buckets are
// finer, because svcnet aims at sub-second programming latency where
// kube-proxy's first bucket is 250 ms.
type Metrics struct {
	SyncDuration            prometheus.Histogram
	SyncFullDuration        prometheus.Histogram
	SyncPartialDuration     prometheus.Histogram
	NetworkProgramming      prometheus.Histogram
	LastSync                prometheus.Gauge
	SyncFailures            prometheus.Counter // every failed sync, whatever failed
	RestoreFailures         prometheus.Counter // failed iptables-restores (iptables, ipvs, userspace)
	PartialRestoreFailures  prometheus.Counter
	Rules                   *prometheus.GaugeVec // by table
	RulesLastSync           *prometheus.GaugeVec // by table: lines written by the last sync
	NoLocalEndpoints        *prometheus.GaugeVec // by traffic_policy: internal, external
	ServiceChanges          prometheus.Counter
	EndpointChanges         prometheus.Counter
	Services                prometheus.Gauge
	Endpoints               prometheus.Gauge
	BadInput                *prometheus.CounterVec // by kind, reason
	ConntrackCleanupErrors  prometheus.Counter
	EndpointDialFailures    prometheus.Counter // userspace mode
	NFTablesSyncFailures    prometheus.Counter // nftables mode: failed transactions
	NFTablesCleanupFailures prometheus.Counter // nftables mode: failed stale-chain deletions
	NFTablesElements        prometheus.Gauge   // nftables mode: elements in the shared sets and maps
}

var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2, 20) // 1 ms … ~9 min

// NewMetrics makes the metrics and registers them with reg (nil: not
// registered, as in tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		SyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubeproxy_sync_proxy_rules_duration_seconds", Help: "Time taken by one sync of the proxy rules.",
			Buckets: latencyBuckets,
		}),
		SyncFullDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubeproxy_sync_full_proxy_rules_duration_seconds", Help: "Time taken by one full sync of the proxy rules.",
			Buckets: latencyBuckets,
		}),
		SyncPartialDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubeproxy_sync_partial_proxy_rules_duration_seconds", Help: "Time taken by one partial sync of the proxy rules.",
			Buckets: latencyBuckets,
		}),
		NetworkProgramming: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kubeproxy_network_programming_duration_seconds",
			Help:    "Time from a Service or EndpointSlice change in the API to the rules being in the kernel.",
			Buckets: latencyBuckets,
		}),
		LastSync: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_last_timestamp_seconds", Help: "When the rules were last synced successfully.",
		}),
		SyncFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svcnet_proxy_sync_failures_total", Help: "Failed syncs of the proxy rules, whatever failed (a restore, a transaction, netlink, a socket).",
		}),
		RestoreFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_iptables_restore_failures_total", Help: "Failed rule restores.",
		}),
		PartialRestoreFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", Help: "Failed partial rule restores.",
		}),
		Rules: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_iptables_total", Help: "Rules programmed, by table.",
		}, []string{"table"}),
		RulesLastSync: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_iptables_last", Help: "Rules written by the last sync, by table.",
		}, []string{"table"}),
		NoLocalEndpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
			Help: "Service ports with a Local traffic policy and no local endpoints, by policy.",
		}, []string{"traffic_policy"}),
		ServiceChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_service_changes_total", Help: "Service port changes applied.",
		}),
		EndpointChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_endpoint_changes_total", Help: "Changed services (Service or EndpointSlice) applied to the rules.",
		}),
		Services: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svcnet_proxy_service_ports", Help: "Service ports programmed.",
		}),
		Endpoints: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svcnet_proxy_endpoints", Help: "Endpoints reachable through the programmed rules.",
		}),
		BadInput: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svcnet_proxy_bad_input_total", Help: "Pieces of Services and EndpointSlices dropped as unusable.",
		}, []string{"kind", "reason"}),
		ConntrackCleanupErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svcnet_proxy_conntrack_cleanup_errors_total", Help: "Failed deletions of stale conntrack entries.",
		}),
		EndpointDialFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svcnet_proxy_userspace_endpoint_dial_failures_total", Help: "Connections to endpoints that failed and were retried on another (userspace mode).",
		}),
		NFTablesSyncFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_nftables_sync_failures_total", Help: "Failed nftables transactions.",
		}),
		NFTablesCleanupFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total", Help: "Failed deletions of stale nftables chains.",
		}),
		NFTablesElements: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svcnet_proxy_nftables_elements", Help: "Elements in the nftables mode's shared sets and maps.",
		}),
	}
	if reg != nil {
		m.MustRegister(reg)
	}
	return m
}

// MustRegister registers the metrics with reg.
func (m *Metrics) MustRegister(reg prometheus.Registerer) {
	reg.MustRegister(m.SyncDuration, m.SyncFullDuration, m.SyncPartialDuration, m.NetworkProgramming,
		m.LastSync, m.SyncFailures, m.RestoreFailures, m.PartialRestoreFailures, m.Rules, m.RulesLastSync,
		m.NoLocalEndpoints, m.ServiceChanges, m.EndpointChanges, m.Services, m.Endpoints, m.BadInput,
		m.ConntrackCleanupErrors, m.EndpointDialFailures, m.NFTablesSyncFailures, m.NFTablesCleanupFailures,
		m.NFTablesElements)
}

// CountBadInput is a svcstate.Config.OnBadInput that counts into m.
func (m *Metrics) CountBadInput(b svcstate.BadInput) {
	m.BadInput.WithLabelValues(b.Kind, string(b.Reason)).Inc()
}
