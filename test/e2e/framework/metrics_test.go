package framework

import (
	"strings"
	"testing"
)

const page0 = `# TYPE svcnet_proxy_endpoints gauge
svcnet_proxy_endpoints{ip_family="IPv4"} 3
svcnet_proxy_endpoints{ip_family="IPv6"} 2
# TYPE prog_seconds histogram
prog_seconds_bucket{le="0.001"} 5
prog_seconds_bucket{le="0.002"} 5
prog_seconds_bucket{le="+Inf"} 6
prog_seconds_sum 0.5
prog_seconds_count 6
# TYPE gc_seconds summary
gc_seconds{quantile="0.5"} 0.001
gc_seconds_sum 0.25
gc_seconds_count 4
`

const page1 = `# TYPE prog_seconds histogram
prog_seconds_bucket{le="0.001"} 102
prog_seconds_bucket{le="0.002"} 104
prog_seconds_bucket{le="+Inf"} 106
prog_seconds_sum 1.5
prog_seconds_count 106
`

func TestMetrics(t *testing.T) {
	m0, err := ParseMetrics(page0)
	if err != nil {
		t.Fatal(err)
	}
	m1, err := ParseMetrics(page1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		labels []string
		want   float64
		ok     bool
	}{
		{nil, 5, true},
		{[]string{"ip_family", "IPv6"}, 2, true},
		{[]string{"ip_family", "IPv5"}, 0, false}, // no such series: not a 0
		{[]string{"table", "nat"}, 0, false},
	} {
		if v, ok := m0.Value("svcnet_proxy_endpoints", tc.labels...); ok != tc.ok || v != tc.want {
			t.Errorf("Value(svcnet_proxy_endpoints, %q) = %v, %v; want %v, %v", tc.labels, v, ok, tc.want, tc.ok)
		}
	}
	for _, name := range []string{"missing", "prog_seconds"} {
		if _, ok := m0.Value(name); ok {
			t.Errorf("Value(%s) found a counter or gauge", name)
		}
	}
	for _, tc := range []struct {
		name  string
		count uint64
		sum   float64
	}{{"prog_seconds", 6, 0.5}, {"gc_seconds", 4, 0.25}, {"missing", 0, 0}} {
		if c, s := m0.Observed(tc.name); c != tc.count || s != tc.sum {
			t.Errorf("Observed(%s) = %d, %v; want %d, %v", tc.name, c, s, tc.count, tc.sum)
		}
		if c, s := m0.Observed(tc.name, "no", "such label"); c != 0 || s != 0 {
			t.Errorf("Observed(%s, no=such label) = %d, %v; want 0, 0", tc.name, c, s)
		}
	}
	for _, tc := range []struct {
		before, after Metrics
		want          string
	}{
		{m0, m1, "≤ 0.001 s: 97, ≤ 0.002 s: 2, ≤ +Inf s: 1"},
		{m1, m1, "none"},
		{m1, m0, "≤ 0.001 s: 5, ≤ +Inf s: 1"}, // counters reset in between
	} {
		if got := HistogramDelta(tc.before, tc.after, "prog_seconds"); got != tc.want {
			t.Errorf("HistogramDelta = %q, want %q", got, tc.want)
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Value with an odd list of label pairs did not panic")
			}
		}()
		odd := strings.Fields("ip_family") // a slice staticcheck does not count
		m0.Value("svcnet_proxy_endpoints", odd...)
	}()
	if _, err := ParseMetrics("a{ 1\n"); err == nil {
		t.Error("a malformed page parsed")
	}
}
