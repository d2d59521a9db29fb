package framework

import (
	"slices"
	"testing"
	"time"
)

// Median is the median of xs (the mean of the middle two when their
// number is even), 0 for none; xs is left as it is.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Percentile is the p-th percentile (0 < p <= 100) of ds by nearest
// rank: the smallest value at least p% of ds are at or below; 0 for none.
// ds is left as it is.
func Percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

// ReportLatencies reports the 50th and 99th percentiles and the maximum
// of d, which must not be empty, as b's metrics name-p50-ms, name-p99-ms
// and name-max-ms. It sorts d.
func ReportLatencies(b *testing.B, name string, d []time.Duration) {
	slices.Sort(d)
	pct := func(p float64) float64 {
		return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.5), name+"-p50-ms")
	b.ReportMetric(pct(0.99), name+"-p99-ms")
	b.ReportMetric(float64(d[len(d)-1].Microseconds())/1000, name+"-max-ms")
}
