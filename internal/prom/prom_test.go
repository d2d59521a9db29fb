package prom

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRegister(t *testing.T) {
	if err := Register(nil, Counter("a_total", "A.")); err != nil {
		t.Fatalf("nil registerer: %v", err)
	}
	MustRegister(nil, Counter("a_total", "A."))

	reg := prometheus.NewRegistry()
	a, b := Counter("a_total", "A."), GaugeVec("b", "B.", "x")
	if err := Register(reg, a, Counter("a_total", "A again."), b); err == nil {
		t.Fatal("registering a_total twice: no error")
	}
	// The one that failed does not keep the others out.
	b.WithLabelValues("y").Set(2)
	if n, err := testutil.GatherAndCount(reg, "a_total", "b"); err != nil || n != 2 {
		t.Fatalf("gathered %d series (%v), want a_total and b", n, err)
	}
}

func TestOptions(t *testing.T) {
	h := HistogramVec("h_seconds", "H.", []float64{1, 2}, "x", "y")
	h.WithLabelValues("1", "2").Observe(1.5)
	const want = `# HELP h_seconds H.
# TYPE h_seconds histogram
h_seconds_bucket{x="1",y="2",le="1"} 0
h_seconds_bucket{x="1",y="2",le="2"} 1
h_seconds_bucket{x="1",y="2",le="+Inf"} 1
h_seconds_sum{x="1",y="2"} 1.5
h_seconds_count{x="1",y="2"} 1
`
	if err := testutil.CollectAndCompare(h, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
