package proxy

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcnet/svcnet/internal/ingress/route"
	"github.com/svcnet/svcnet/internal/ingress/upstream"
	"github.com/svcnet/svcnet/internal/prom"
)

type metrics struct {
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	connectErrors prometheus.Counter
	sendTimeouts  prometheus.Counter
	mirrorSkipped prometheus.Counter
	mirrorFailed  prometheus.Counter
	streams       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	labels := []string{"namespace", "ingress", "service"}
	m := &metrics{
		requests: prom.CounterVec("svcnet_ingress_requests_total",
			"Requests answered, by Ingress, backend Service and status class (2xx…5xx); namespace, ingress and service are empty for requests no rule matched.",
			append(labels, "status")...),
		duration: prom.HistogramVec("svcnet_ingress_request_duration_seconds",
			"Time from a request's headers to the end of its answer, by Ingress and backend.",
			[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}, labels...),
		connectErrors: prom.Counter("svcnet_ingress_upstream_connect_errors_total",
			"Connections to pods that failed (each retried on the next endpoint)."),
		sendTimeouts: prom.Counter("svcnet_ingress_send_timeouts_total",
			"Client connections closed because the client took none of its answer for the send timeout (--send-timeout)."),
		mirrorSkipped: prom.Counter("svcnet_ingress_mirror_skipped_total",
			"Requests of Gateway routes with a RequestMirror that were not mirrored: a body of unknown length or over 64 KiB."),
		mirrorFailed: prom.Counter("svcnet_ingress_mirror_failed_total",
			"Mirrored copies of requests that failed (no endpoint, or the mirror backend did not answer)."),
		streams: prom.CounterVec("svcnet_ingress_stream_connections_total",
			"Connections to Gateway TLS listeners, by outcome: joined to a backend, or closed for no_sni, no_listener, no_route, no_endpoint, handshake_failed.",
			"outcome"),
	}
	prom.MustRegister(reg, m.requests, m.duration, m.connectErrors, m.sendTimeouts, m.mirrorSkipped, m.mirrorFailed, m.streams)
	return m
}

var statusClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

func statusClass(code int) string {
	if c := code / 100; c >= 1 && c <= 5 {
		return statusClasses[c-1]
	}
	return strconv.Itoa(code)
}

func (m *metrics) observe(rt *route.Route, up *upstream.Upstream, status int, d time.Duration) {
	var ns, ing, svc string
	if rt != nil {
		ns, ing = rt.Ingress.Namespace, rt.Ingress.Name
	}
	if up != nil {
		svc = up.Ref.Name
	}
	m.requests.WithLabelValues(ns, ing, svc, statusClass(status)).Inc()
	m.duration.WithLabelValues(ns, ing, svc).Observe(d.Seconds())
}

// routeObs are the metrics of one route and backend, looked up once: a
// lookup by label values hashes them each time, a few per cent of the
// engine's CPU.
type routeObs struct {
	m        *metrics
	route    *route.Route
	up       *upstream.Upstream
	labels   [3]string
	duration prometheus.Observer
	byClass  [5]prometheus.Counter // made at a class's first request
}

func (m *metrics) forRoute(rt *route.Route, up *upstream.Upstream) *routeObs {
	o := &routeObs{m: m, route: rt, up: up,
		labels: [3]string{rt.Ingress.Namespace, rt.Ingress.Name, up.Ref.Name}}
	o.duration = m.duration.WithLabelValues(o.labels[:]...)
	return o
}

func (o *routeObs) observe(status int, d time.Duration) {
	c := status/100 - 1
	if c < 0 || c >= len(o.byClass) {
		o.m.requests.WithLabelValues(o.labels[0], o.labels[1], o.labels[2], statusClass(status)).Inc()
	} else {
		if o.byClass[c] == nil {
			o.byClass[c] = o.m.requests.WithLabelValues(o.labels[0], o.labels[1], o.labels[2], statusClasses[c])
		}
		o.byClass[c].Inc()
	}
	o.duration.Observe(d.Seconds())
}
