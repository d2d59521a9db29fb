package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcnet/svcnet/internal/prom"
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
		SyncDuration: prom.Histogram("kubeproxy_sync_proxy_rules_duration_seconds",
			"Time taken by one sync of the proxy rules.", latencyBuckets),
		SyncFullDuration: prom.Histogram("kubeproxy_sync_full_proxy_rules_duration_seconds",
			"Time taken by one full sync of the proxy rules.", latencyBuckets),
		SyncPartialDuration: prom.Histogram("kubeproxy_sync_partial_proxy_rules_duration_seconds",
			"Time taken by one partial sync of the proxy rules.", latencyBuckets),
		NetworkProgramming: prom.Histogram("kubeproxy_network_programming_duration_seconds",
			"Time from a Service or EndpointSlice change in the API to the rules being in the kernel.", latencyBuckets),
		LastSync: prom.Gauge("kubeproxy_sync_proxy_rules_last_timestamp_seconds", "When the rules were last synced successfully."),
		SyncFailures: prom.Counter("svcnet_proxy_sync_failures_total",
			"Failed syncs of the proxy rules, whatever failed (a restore, a transaction, netlink, a socket)."),
		RestoreFailures:        prom.Counter("kubeproxy_sync_proxy_rules_iptables_restore_failures_total", "Failed rule restores."),
		PartialRestoreFailures: prom.Counter("kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", "Failed partial rule restores."),
		Rules:                  prom.GaugeVec("kubeproxy_sync_proxy_rules_iptables_total", "Rules programmed, by table.", "table"),
		RulesLastSync:          prom.GaugeVec("kubeproxy_sync_proxy_rules_iptables_last", "Rules written by the last sync, by table.", "table"),
		NoLocalEndpoints: prom.GaugeVec("kubeproxy_sync_proxy_rules_no_local_endpoints_total",
			"Service ports with a Local traffic policy and no local endpoints, by policy.", "traffic_policy"),
		ServiceChanges: prom.Counter("kubeproxy_sync_proxy_rules_service_changes_total", "Service port changes applied."),
		EndpointChanges: prom.Counter("kubeproxy_sync_proxy_rules_endpoint_changes_total",
			"Changed services (Service or EndpointSlice) applied to the rules."),
		Services:  prom.Gauge("svcnet_proxy_service_ports", "Service ports programmed."),
		Endpoints: prom.Gauge("svcnet_proxy_endpoints", "Endpoints reachable through the programmed rules."),
		BadInput: prom.CounterVec("svcnet_proxy_bad_input_total",
			"Pieces of Services and EndpointSlices dropped as unusable.", "kind", "reason"),
		ConntrackCleanupErrors: prom.Counter("svcnet_proxy_conntrack_cleanup_errors_total", "Failed deletions of stale conntrack entries."),
		EndpointDialFailures: prom.Counter("svcnet_proxy_userspace_endpoint_dial_failures_total",
			"Connections to endpoints that failed and were retried on another (userspace mode)."),
		NFTablesSyncFailures:    prom.Counter("kubeproxy_sync_proxy_rules_nftables_sync_failures_total", "Failed nftables transactions."),
		NFTablesCleanupFailures: prom.Counter("kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total", "Failed deletions of stale nftables chains."),
		NFTablesElements:        prom.Gauge("svcnet_proxy_nftables_elements", "Elements in the nftables mode's shared sets and maps."),
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
