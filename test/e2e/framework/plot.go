package framework

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// LinePlot is a chart of series over a common x axis, drawn as a
// self-contained SVG by Go alone (no plotting tool), in the style of the
// figures of docs/img: white ground, grey grid, a legend on the right.
type LinePlot struct {
	Title, XLabel, YLabel string
	Series                []Series
	// Marks are vertical dashed lines at an x (a fault, say), labelled.
	Marks []Mark
	// Width is the SVG's width in pixels (default 900); its height grows
	// with the legend.
	Width int
}

// Series is one line: Y[i] at X[i]. A NaN Y breaks the line (a gap in
// the samples, such as a process being restarted).
type Series struct {
	Name string
	X, Y []float64
}

// Mark is a vertical line at X.
type Mark struct {
	X     float64
	Label string
}

// plotColors are told apart by eye; series beyond them repeat a colour
// with a dash pattern.
var plotColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

var plotDashes = []string{"", "6,3", "2,2", "8,3,2,3"}

// SVG draws the plot. The y axis starts at 0 and ends at a round value
// above the largest Y; the x axis spans the series' X.
func (p LinePlot) SVG() string {
	const left, right, top, bottom, legendRow = 70, 260, 34, 50, 16
	w := p.Width
	if w == 0 {
		w = 900
	}
	h := max(380, top+bottom+legendRow*len(p.Series)+20)
	xlo, xhi, yhi := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range p.Series {
		for i, x := range s.X {
			xlo, xhi = math.Min(xlo, x), math.Max(xhi, x)
			if i < len(s.Y) && !math.IsNaN(s.Y[i]) {
				yhi = math.Max(yhi, s.Y[i])
			}
		}
	}
	if math.IsInf(xlo, 1) {
		xlo, xhi = 0, 1
	}
	if xhi <= xlo {
		xhi = xlo + 1
	}
	step := niceStep(yhi / 4)
	yTop := step * math.Max(1, math.Ceil(yhi/step))
	x := func(v float64) float64 { return left + (v-xlo)/(xhi-xlo)*float64(w-left-right) }
	y := func(v float64) float64 { return float64(h-bottom) - v/yTop*float64(h-bottom-top) }

	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&s, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&s, `<text x="%d" y="20" font-size="14">%s</text>`+"\n", left, html.EscapeString(p.Title))
	for v := 0.0; v <= yTop+step/2; v += step {
		fmt.Fprintf(&s, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(v), w-right, y(v))
		fmt.Fprintf(&s, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y(v)+4, strconv.FormatFloat(v, 'g', 4, 64))
	}
	xstep := niceStep((xhi - xlo) / 8)
	for v := math.Ceil(xlo/xstep) * xstep; v <= xhi+xstep/1e6; v += xstep {
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`+"\n", x(v), top, x(v), h-bottom)
		fmt.Fprintf(&s, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(v), h-bottom+16, strconv.FormatFloat(v, 'g', 4, 64))
	}
	fmt.Fprintf(&s, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&s, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, h-bottom)
	fmt.Fprintf(&s, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (left+w-right)/2, h-12, html.EscapeString(p.XLabel))
	fmt.Fprintf(&s, `<text transform="translate(16 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (top+h-bottom)/2, html.EscapeString(p.YLabel))
	for _, m := range p.Marks {
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#999" stroke-dasharray="3,3"/>`+"\n", x(m.X), top, x(m.X), h-bottom)
		fmt.Fprintf(&s, `<text transform="translate(%.1f %d) rotate(-90)" font-size="10" fill="#666">%s</text>`+"\n", x(m.X)+10, h-bottom-4, html.EscapeString(m.Label))
	}
	for i, ser := range p.Series {
		color, dash := plotColors[i%len(plotColors)], plotDashes[i/len(plotColors)%len(plotDashes)]
		style := ""
		if dash != "" {
			style = fmt.Sprintf(` stroke-dasharray="%s"`, dash)
		}
		// One polyline per unbroken run of samples; a lone sample is a dot.
		var run [][2]float64
		flush := func() {
			switch len(run) {
			case 0:
			case 1:
				fmt.Fprintf(&s, `<circle cx="%.1f" cy="%.1f" r="2" fill="%s"/>`+"\n", run[0][0], run[0][1], color)
			default:
				pts := make([]string, len(run))
				for k, pt := range run {
					pts[k] = fmt.Sprintf("%.1f,%.1f", pt[0], pt[1])
				}
				fmt.Fprintf(&s, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"%s/>`+"\n", strings.Join(pts, " "), color, style)
			}
			run = run[:0]
		}
		for j := range ser.X {
			if j >= len(ser.Y) || math.IsNaN(ser.Y[j]) {
				flush()
				continue
			}
			run = append(run, [2]float64{x(ser.X[j]), y(ser.Y[j])})
		}
		flush()
		ly := top + 10 + legendRow*i
		fmt.Fprintf(&s, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", w-right+10, ly-4, w-right+34, ly-4, color, style)
		fmt.Fprintf(&s, `<text x="%d" y="%d">%s</text>`+"\n", w-right+40, ly, html.EscapeString(ser.Name))
	}
	s.WriteString("</svg>\n")
	return s.String()
}

// niceStep is the smallest of 1, 2 and 5 times a power of ten at least v
// (1 for v <= 0): a grid step a reader can add up.
func niceStep(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
