package framework

import (
	"fmt"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is one scrape of a /metrics page (Prometheus's text format),
// parsed by Prometheus's own parser: svcnet's, CoreDNS's, kube-proxy's
// pages read alike, whatever their labels and escaping.
type Metrics map[string]*dto.MetricFamily

// ParseMetrics parses a /metrics page.
func ParseMetrics(body string) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return Metrics(fams), nil
}

// Value is the sum over the series of the counter, gauge or untyped
// metric name (one series per label set, e.g. per IP family) that have
// the labels given as name, value pairs (all series without); ok tells
// whether any series of one of those types has them. A check that a
// count is 0 needs ok: a page without the series would pass it too.
func (m Metrics) Value(name string, labels ...string) (v float64, ok bool) {
	if len(labels)%2 != 0 {
		panic(fmt.Sprintf("Value(%s): labels %q are not name, value pairs", name, labels))
	}
	sum := 0.0
	for _, s := range m[name].GetMetric() {
		if !hasLabels(s, labels) {
			continue
		}
		switch {
		case s.Counter != nil:
			sum += s.Counter.GetValue()
		case s.Gauge != nil:
			sum += s.Gauge.GetValue()
		case s.Untyped != nil:
			sum += s.Untyped.GetValue()
		default:
			return 0, false
		}
		ok = true
	}
	return sum, ok
}

func hasLabels(s *dto.Metric, pairs []string) bool {
	for i := 0; i < len(pairs); i += 2 {
		found := false
		for _, l := range s.GetLabel() {
			if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Observed is the count and the sum of the observations of the
// histogram or summary name, over its series that have the labels given
// as name, value pairs (every series without; zero when absent).
func (m Metrics) Observed(name string, labels ...string) (count uint64, sum float64) {
	if len(labels)%2 != 0 {
		panic(fmt.Sprintf("Observed(%s): labels %q are not name, value pairs", name, labels))
	}
	for _, s := range m[name].GetMetric() {
		if !hasLabels(s, labels) {
			continue
		}
		switch {
		case s.Histogram != nil:
			count, sum = count+s.Histogram.GetSampleCount(), sum+s.Histogram.GetSampleSum()
		case s.Summary != nil:
			count, sum = count+s.Summary.GetSampleCount(), sum+s.Summary.GetSampleSum()
		}
	}
	return count, sum
}

// buckets is the cumulative count of the histogram name per upper
// bound, over every series.
func (m Metrics) buckets(name string) map[float64]uint64 {
	out := map[float64]uint64{}
	for _, s := range m[name].GetMetric() {
		for _, b := range s.GetHistogram().GetBucket() {
			out[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	return out
}

// HistogramDelta is how the observations of the histogram name made
// between two scrapes fall into its buckets: "≤ 0.001 s: 97, ≤ 0.002 s:
// 2, …", counts per bucket (not cumulative), empty buckets left out,
// "none" when nothing was observed. A bucket that counts fewer after
// than before means the process started again in between (its counters
// with it): the delta is then all that after counts, as Prometheus's
// rate() takes a reset.
func HistogramDelta(before, after Metrics, name string) string {
	b0, b1 := before.buckets(name), after.buckets(name)
	for le, n := range b1 {
		if n < b0[le] {
			b0 = nil
			break
		}
	}
	bounds := slices.Sorted(func(yield func(float64) bool) {
		for le := range b1 {
			if !yield(le) {
				return
			}
		}
	})
	var parts []string
	var prev uint64
	for _, le := range bounds {
		cum := b1[le] - b0[le]
		if cum > prev {
			parts = append(parts, fmt.Sprintf("≤ %g s: %d", le, cum-prev))
		}
		prev = cum
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
