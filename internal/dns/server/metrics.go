package server

import (
	"sync/atomic"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcnet/svcnet/internal/prom"
)

type metrics struct {
	requests  *prometheus.CounterVec
	responses *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	// The children of the vectors above, found once: hashing label
	// values on every query costs as much as answering it.
	reqCells    [2][len(metricTypes) + 1]atomic.Pointer[prometheus.Counter]
	respCells   [len(metricTypes) + 1][numRcodes][len(sources)]atomic.Pointer[prometheus.Counter]
	durCells    [len(sources)]atomic.Pointer[prometheus.Observer]
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
		requests: prom.CounterVec("svcnet_dns_requests_total", "Queries received, by transport and query type.", "proto", "type"),
		responses: prom.CounterVec("svcnet_dns_responses_total",
			"Responses sent, by query type, rcode and source (zone, forward, autopath, invalid).", "type", "rcode", "source"),
		duration: prom.HistogramVec("svcnet_dns_request_duration_seconds", "Time from reading a query to having its response, by source.",
			prometheus.ExponentialBuckets(0.00001, 2, 20), "source"), // 10µs .. 5s
		truncated: prom.CounterVec("svcnet_dns_truncated_responses_total",
			"Responses sent with TC set because they did not fit the client's buffer.", "proto"),
		dropped:  prom.Counter("svcnet_dns_dropped_packets_total", "Packets not answered: shorter than a header, or responses."),
		autopath: prom.Counter("svcnet_dns_autopath_success_total", "Queries answered from a search-path expansion on the server."),
		programming: prom.Histogram("svcnet_dns_programming_duration_seconds", "Time from an API change to the zone answering with it.",
			prometheus.ExponentialBuckets(0.000125, 2, 19)), // 125µs .. 33s
		updates:  prom.Counter("svcnet_dns_zone_updates_total", "Zone snapshots swapped in."),
		synced:   prom.Gauge("svcnet_dns_zone_synced", "1 once the zone is served from synced informers."),
		services: prom.Gauge("svcnet_dns_zone_services", "Services in the current zone snapshot."),
	}
	return m, prom.Register(reg, m.requests, m.responses, m.duration, m.truncated, m.dropped,
		m.autopath, m.programming, m.updates, m.synced, m.services)
}

// metricTypes are the query types with a label of their own, so a client
// cannot grow the metrics' cardinality by asking for every type number.
var metricTypes = [...]uint16{
	dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeCNAME, dns.TypeTXT, dns.TypeMX,
	dns.TypeNS, dns.TypeSOA, dns.TypeANY, dns.TypeHTTPS, dns.TypeSVCB, dns.TypeCAA, dns.TypeDS,
	dns.TypeDNSKEY, dns.TypeAXFR, dns.TypeIXFR,
}

// typeIndex maps a query type to its place in metricTypes plus one; 0 is
// "other", and "none" (no single question) is counted as other too.
var typeIndex = func() (t [1 << 16]uint8) {
	for i, typ := range metricTypes {
		t[typ] = uint8(i + 1)
	}
	return t
}()

// sources are the values of the source label, in a fixed order.
var sources = [...]string{sourceZone, sourceForward, sourceAutopath, sourceInvalid}

// srcForward is sourceForward's index in sources, which the memo's
// entries keep instead of the string.
var srcForward = uint8(sourceIndex(sourceForward))

func sourceIndex(s string) int {
	for i, v := range sources {
		if v == s {
			return i
		}
	}
	return len(sources) - 1
}

// numRcodes covers the rcodes with names (up to BADCOOKIE, 23) plus one
// cell for "other".
const numRcodes = 25

func typeLabelAt(i uint8) string {
	if i == 0 {
		return "other"
	}
	return dns.TypeToString[metricTypes[i-1]]
}

// cell returns the metric in c, making it with mk the first time (a
// race makes it twice, which is harmless: the vector returns one child).
// Children are made lazily so that /metrics lists only series that
// happened.
func cell[M any](c *atomic.Pointer[M], mk func() M) M {
	if p := c.Load(); p != nil {
		return *p
	}
	v := mk()
	c.Store(&v)
	return v
}

// observe records how long a query from source took.
func (m *metrics) observe(source string, seconds float64) {
	si := sourceIndex(source)
	cell(&m.durCells[si], func() prometheus.Observer { return m.duration.WithLabelValues(sources[si]) }).Observe(seconds)
}

// count adds one query and its response to the counters.
func (m *metrics) count(proto string, hasQuestion bool, qtype uint16, rcode int, source string) {
	ti, typ := uint8(0), "none"
	if hasQuestion {
		ti = typeIndex[qtype]
		typ = typeLabelAt(ti)
	}
	pi := 0
	if proto == "tcp" {
		pi = 1
	}
	ri := rcode
	if ri < 0 || ri >= numRcodes-1 || dns.RcodeToString[ri] == "" {
		ri = numRcodes - 1
	}
	si := sourceIndex(source)
	if !hasQuestion {
		// "none" is rare (unparsable packets): no cell of its own.
		m.requests.WithLabelValues(proto, typ).Inc()
		m.responses.WithLabelValues(typ, rcodeLabel(rcode), source).Inc()
		return
	}
	cell(&m.reqCells[pi][ti], func() prometheus.Counter { return m.requests.WithLabelValues(proto, typ) }).Inc()
	cell(&m.respCells[ti][ri][si], func() prometheus.Counter {
		return m.responses.WithLabelValues(typ, rcodeLabel(rcode), source)
	}).Inc()
}

func rcodeLabel(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return "other"
}

// registerMemo exports the memo's counters, read at each scrape: the
// lookups themselves only add to atomics.
func registerMemo(reg prometheus.Registerer, m *memo) error {
	lookups := func(result string, read func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "svcnet_dns_memo_lookups_total",
			Help:        "Lookups of packed answers: hit (the entry holds), miss (no entry), stale (the entry no longer holds).",
			ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 { return float64(read()) })
	}
	return prom.Register(reg,
		lookups("hit", func() uint64 { h, _, _ := m.counts(); return h }),
		lookups("miss", func() uint64 { _, n, _ := m.counts(); return n }),
		lookups("stale", func() uint64 { _, _, st := m.counts(); return st }),
		prom.CounterFunc("svcnet_dns_memo_resets_total", "Times the memo was full and started again empty.",
			func() float64 { return float64(m.resets.Load()) }),
		prom.GaugeFunc("svcnet_dns_memo_entries", "Packed answers the memo holds.",
			func() float64 { return float64(m.n.Load()) }),
	)
}
