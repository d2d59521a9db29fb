package framework

import (
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"
)

func TestNiceStep(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{
		{0, 1}, {-3, 1}, {math.NaN(), 1}, {0.3, 0.5}, {1, 1}, {1.2, 2}, {3, 5}, {7, 10}, {42, 50}, {180, 200},
	} {
		if got := niceStep(tc.in); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("niceStep(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestLinePlotSVG: the SVG is well-formed XML, names every series, breaks
// a line at a NaN and escapes what it prints.
func TestLinePlotSVG(t *testing.T) {
	p := LinePlot{
		Title: "RSS <MiB>", XLabel: "minutes", YLabel: "MiB",
		Series: []Series{
			{Name: "a & b", X: []float64{0, 1, 2, 3}, Y: []float64{10, 12, math.NaN(), 11}},
			{Name: "lone", X: []float64{2}, Y: []float64{5}},
		},
		Marks: []Mark{{X: 1.5, Label: "kill -9"}},
	}
	svg := p.SVG()
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := d.Token(); err != nil {
			if err != io.EOF {
				t.Fatalf("not well-formed: %v\n%s", err, svg)
			}
			break
		}
	}
	for _, want := range []string{"a &amp; b", "lone", "RSS &lt;MiB&gt;", "kill -9", "<circle"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	// a & b: a line over its first two samples, then a dot after the gap.
	if n := strings.Count(svg, "<polyline"); n != 1 {
		t.Errorf("%d polylines, want 1 (the gap breaks the line; lone runs are dots)", n)
	}
	if n := strings.Count(svg, "<circle"); n != 2 {
		t.Errorf("%d dots, want 2", n)
	}
}
