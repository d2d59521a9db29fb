package cluster_test

import (
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/internal/loadgen"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// The soak's report: what it writes (docs/soak/report.md and the plots
// beside it) and what it asserts, from what run recorded.

// usage is one component's usage in the two compared windows (the
// second sixth of the run and the last), the medians of its samples: a
// moment's spike (a full resync, a burst of connections) moves neither.
type usage struct {
	key                 string
	rssA, rssB          float64
	fdsA, fdsB          float64
	goA, goB            float64 // NaN: no go_goroutines
	pidsA, pidsB        []int
	leadingA, leadingB  []bool  // the roles seen in each window
	rssGrowth, fdGrowth float64 // percent
}

// restarted: the component ran as another process in the last window
// than in the second (a fault struck it in between).
func (u usage) restarted() bool { return !slices.Equal(u.pidsA, u.pidsB) }

// comparable: the component ran as one process, in one role (leading or
// standby), through both windows, so that its growth measures a leak.
func (u usage) comparable() bool {
	return len(u.pidsA) == 1 && !u.restarted() && len(u.leadingA) == 1 && slices.Equal(u.leadingA, u.leadingB)
}

// note says why a component's growth is no leak's measure.
func (u usage) note() string {
	switch {
	case u.restarted() || len(u.pidsA) != 1:
		return "restarted"
	case !u.comparable():
		return "leader changed"
	}
	return ""
}

func (s *soak) usages() []usage {
	a0, a1 := s.start.Add(s.plan.Window), s.start.Add(2*s.plan.Window)
	b0 := s.start.Add(s.plan.Duration - s.plan.Window)
	type acc struct {
		rss, fds, gor []float64
		pids          []int
		leading       []bool
	}
	inA, inB := map[string]*acc{}, map[string]*acc{}
	add := func(m map[string]*acc, p procSample) {
		a := m[p.Key]
		if a == nil {
			a = &acc{}
			m[p.Key] = a
		}
		a.rss, a.fds = append(a.rss, p.RSS), append(a.fds, p.FDs)
		if !math.IsNaN(p.Goroutines) {
			a.gor = append(a.gor, p.Goroutines)
		}
		if !slices.Contains(a.pids, p.PID) {
			a.pids = append(a.pids, p.PID)
		}
		if !slices.Contains(a.leading, p.Leading) {
			a.leading = append(a.leading, p.Leading)
		}
	}
	for _, p := range s.samples {
		switch {
		case !p.At.Before(a0) && p.At.Before(a1):
			add(inA, p)
		case !p.At.Before(b0):
			add(inB, p)
		}
	}
	median := func(xs []float64) float64 {
		if len(xs) == 0 {
			return math.NaN()
		}
		return framework.Median(xs)
	}
	var out []usage
	for _, key := range slices.Sorted(maps.Keys(inA)) {
		a, b := inA[key], inB[key]
		if b == nil {
			continue // replaced (a deleted pod's successor is another key)
		}
		u := usage{key: key, rssA: median(a.rss), rssB: median(b.rss), fdsA: median(a.fds), fdsB: median(b.fds),
			goA: median(a.gor), goB: median(b.gor), pidsA: a.pids, pidsB: b.pids, leadingA: a.leading, leadingB: b.leading}
		u.rssGrowth, u.fdGrowth = 100*(u.rssB/u.rssA-1), 100*(u.fdsB/u.fdsA-1)
		out = append(out, u)
	}
	return out
}

// clock is a time as an offset from the start, m:ss.
func (s *soak) clock(at time.Time) string {
	d := at.Sub(s.start).Round(time.Second)
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	return fmt.Sprintf("%s%d:%02d", sign, int(d.Minutes()), int(d.Seconds())%60)
}

// during lists what was going on at t: faults from their strike to the
// end of their window, rollouts until complete.
func (s *soak) during(at time.Time, took time.Duration) string {
	var what []string
	end := at.Add(took)
	for _, f := range s.faults {
		if !end.Before(f.At) && at.Before(f.To) {
			what = append(what, fmt.Sprintf("fault %q (%s, struck %s at %s, recovered in %.1fs)", f.Name, f.How, s.clock(f.At), f.At.Format("15:04:05.000"), f.Took.Seconds()))
		}
	}
	for _, r := range s.rollouts {
		if !end.Before(r.At) && at.Before(r.At.Add(max(r.Took, time.Second))) {
			what = append(what, fmt.Sprintf("rollout from %s (%.0fs)", s.clock(r.At), r.Took.Seconds()))
		}
	}
	if len(what) == 0 {
		return "no fault or rollout"
	}
	return strings.Join(what, "; ")
}

func kindsText(kinds map[string]int) string {
	var ks []string
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		ks = append(ks, fmt.Sprintf("%s %d", k, kinds[k]))
	}
	return strings.Join(ks, ", ")
}

func msText(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func latencies(os []loadgen.Outcome) []time.Duration {
	ds := make([]time.Duration, 0, len(os))
	for _, o := range os {
		if o.Took > 0 { // a "client saturated" tick took no time
			ds = append(ds, o.Took)
		}
	}
	return ds
}

// writeReport writes report.md and the plots into dir.
func (s *soak) writeReport(dir string) {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# Soak: %v under faults", s.plan.Duration)
	p("")
	p("Written by `TestSoak` (test/e2e/cluster/soak_test.go, `make soak`) on %s: `svcnet up --nodes 3 --control-planes 3`, "+
		"%d requests (lookups) per second on each path, every request on a new connection with a real client's timeouts "+
		"(5 s to connect, 10 s in all; DNS: glibc's two tries of 5 s). Rollouts of `hostnames` every %v, "+
		"a Service, Ingress or pod created or deleted every %v (each deleted %v after its creation), a fault every %v, "+
		"usage sampled every %v. Growth compares the medians of the samples of %s–%s with those of %s–%s.",
		s.start.Format("2006-01-02 15:04 MST"), soakRate, s.plan.RolloutEvery, s.plan.ChurnEvery, s.plan.ChurnLife, s.plan.FaultEvery, s.plan.SampleEvery,
		s.clock(s.start.Add(s.plan.Window)), s.clock(s.start.Add(2*s.plan.Window)), s.clock(s.start.Add(s.plan.Duration-s.plan.Window)), s.clock(s.start.Add(s.plan.Duration)))
	p("")
	p("The machine: %d CPUs, load average %s at the start and %s at the end (1, 5, 15 minutes).", runtime.NumCPU(), s.loadStart, s.loadEnd)
	p("")
	p("## Requests")
	p("")
	p("| path | sent | failed | lost with a killed server | p50 | p99 | max |")
	p("|---|---|---|---|---|---|---|")
	for _, path := range s.paths {
		sent, failed, kinds := loadgen.Count(path.outcomes, s.start, s.end.Add(time.Hour))
		lat := latencies(path.outcomes)
		f := fmt.Sprint(failed)
		if failed > 0 {
			f += " (" + kindsText(kinds) + ")"
		}
		p("| %s | %d | %s | %d | %s | %s | %s |", path.name, sent+len(path.lost), f, len(path.lost),
			msText(framework.Percentile(lat, 50)), msText(framework.Percentile(lat, 99)), msText(framework.Percentile(lat, 100)))
	}
	p("")
	p("A request lost with a killed server was in flight to a serving process that a fault")
	p("killed with SIGKILL, its connection accepted by that process's socket, then reset or")
	p("closed when the process ended: lost with the process in every system")
	p("(docs/reliability.md). Every other failed request fails the soak.")
	p("")
	p("## Faults")
	p("")
	head, rule := "| at | fault | how | recovered in |", "|---|---|---|---|"
	for _, path := range s.paths {
		head += " " + path.name + " |"
		rule += "---|"
	}
	p("%s", head)
	p("%s", rule)
	for _, f := range s.faults {
		rec := fmt.Sprintf("%.1f s", f.Took.Seconds())
		if !f.Recovered {
			rec = "**not recovered**: " + f.Problem
		}
		row := fmt.Sprintf("| %s | %s | %s | %s |", s.clock(f.At), f.Name, f.How, rec)
		for _, path := range s.paths {
			sent, failed, kinds := loadgen.Count(path.outcomes, f.At, f.To)
			cell := fmt.Sprintf(" %d of %d", failed, sent)
			if failed > 0 {
				cell = fmt.Sprintf(" **%d of %d** (%s)", failed, sent, kindsText(kinds))
			}
			row += cell + " |"
		}
		p("%s", row)
	}
	p("")
	p("## Rollouts and churn")
	p("")
	var took []float64
	complete := 0
	for _, r := range s.rollouts {
		if r.Complete {
			complete++
			took = append(took, r.Took.Seconds())
		}
	}
	p("`kubectl rollout restart deployment/hostnames`: %d started, %d complete (all pods new and ready, the old ones gone)", len(s.rollouts), complete)
	if len(took) > 0 {
		p("in %.1f s (median), %.1f s at most.", framework.Median(took), slices.Max(took))
	}
	for _, r := range s.rollouts {
		if r.Problem != "" {
			p("- rollout at %s: %s", s.clock(r.At), r.Problem)
		}
	}
	p("")
	p("| churn | created | create failed | deleted | delete failed |")
	p("|---|---|---|---|---|")
	for _, kind := range []string{"Service", "Ingress", "Pod"} {
		n := map[string]int{}
		fails := map[string]map[string]int{"create": {}, "delete": {}}
		for _, o := range s.churnOps {
			if o.Kind != kind {
				continue
			}
			if o.Result == "" {
				n[o.Op]++
			} else {
				fails[o.Op][o.Result]++
			}
		}
		cell := func(op string) string {
			c := 0
			for _, v := range fails[op] {
				c += v
			}
			if c == 0 {
				return "0"
			}
			return fmt.Sprintf("%d (%s)", c, kindsText(fails[op]))
		}
		p("| %s | %d | %s | %d | %s |", kind, n["create"], cell("create"), n["delete"], cell("delete"))
	}
	if len(s.leftover) > 0 {
		p("")
		p("Left after the churn stopped: %s.", strings.Join(s.leftover, ", "))
	}
	// The API requests that failed (not asserted: a request in flight on
	// a killed API server or etcd member fails, as client-go does not
	// retry a write; a failed delete is tried again at the next tick).
	first := true
	for _, o := range s.churnOps {
		if o.Result == "" {
			continue
		}
		if first {
			p("")
			p("API requests of the churn that failed:")
			p("")
			first = false
		}
		p("- %s %s %s at %s (%s): %s; during: %s", o.Op, o.Kind, o.Name, s.clock(o.At), o.At.Format("15:04:05.000"), o.Result, s.during(o.At, o.Took))
	}
	p("")
	p("## Usage: the second sixth of the run against the last")
	p("")
	p("Medians of the samples of each window; growth may be at most %.0f %% (RSS and open files) for a component that ran "+
		"as the same process in the same role throughout (\"restarted\": a fault replaced it in between; \"leader changed\": "+
		"a standby controller manager took the lead, which starts every controller; neither is a leak's measure; "+
		"a replica whose pod was deleted is another component).", soakGrowthLimit)
	if !s.growthAsserted() {
		p("")
		p("This run's windows (%v) are too short for the bound to be asserted (%v at least): the figures are reported only.", s.plan.Window, soakMinGrowthWindow)
	}
	p("")
	p("| component | RSS (MiB) | growth | open files | growth | goroutines |")
	p("|---|---|---|---|---|---|")
	for _, u := range s.usages() {
		key := u.key
		if n := u.note(); n != "" {
			key += " (" + n + ")"
		}
		gor := "—"
		if !math.IsNaN(u.goA) && !math.IsNaN(u.goB) {
			gor = fmt.Sprintf("%.0f → %.0f", u.goA, u.goB)
		}
		p("| %s | %.1f → %.1f | %s | %.0f → %.0f | %s | %s |", key, u.rssA/(1<<20), u.rssB/(1<<20), growthText(u.rssGrowth), u.fdsA, u.fdsB, growthText(u.fdGrowth), gor)
	}
	p("")
	p("| conntrack entries | second sixth | last sixth | most |")
	p("|---|---|---|---|")
	for _, where := range append(slices.Clone(soakNodes), "edge") {
		var a, bb, all []float64
		for _, c := range s.conntrack {
			if c.Where != where {
				continue
			}
			all = append(all, c.Entries)
			switch {
			case !c.At.Before(s.start.Add(s.plan.Window)) && c.At.Before(s.start.Add(2*s.plan.Window)):
				a = append(a, c.Entries)
			case !c.At.Before(s.start.Add(s.plan.Duration - s.plan.Window)):
				bb = append(bb, c.Entries)
			}
		}
		if len(all) > 0 {
			p("| %s | %.0f | %.0f | %.0f |", where, framework.Median(a), framework.Median(bb), slices.Max(all))
		}
	}
	p("")
	p("## Failed requests")
	p("")
	failures := 0
	for _, path := range s.paths {
		for _, o := range path.lost {
			failures++
			p("- %s %s (%s): %s after %v, %s; lost with a killed server (in flight to its process when it ended)",
				path.name, s.clock(o.At), o.At.Format("15:04:05.000"), o.Kind, o.Took.Round(time.Millisecond), o.Detail)
		}
		for _, o := range path.outcomes {
			if o.Kind == "" {
				continue
			}
			failures++
			line := fmt.Sprintf("- %s %s (%s): %s after %v", path.name, s.clock(o.At), o.At.Format("15:04:05.000"), o.Kind, o.Took.Round(time.Millisecond))
			if o.Detail != "" {
				line += ", " + o.Detail
			}
			line += "; during: " + s.during(o.At, o.Took)
			for _, st := range path.stalls {
				if st.At.Before(o.At.Add(o.Took)) && o.At.Before(st.At.Add(st.Len)) {
					line += "; " + st.String()
				}
			}
			p("%s", line)
		}
	}
	if failures == 0 {
		p("None.")
	}
	p("")
	p("## Plots")
	p("")
	plots := s.plots()
	for _, name := range slices.Sorted(maps.Keys(plots)) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(plots[name].SVG()), 0o644); err != nil {
			s.t.Errorf("plot %s: %v", name, err)
		}
		p("![%s](%s)", plots[name].Title, name)
		p("")
	}
	path := filepath.Join(dir, "report.md")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		s.t.Errorf("report: %v", err)
	}
	s.t.Logf("soak report (%s):\n%s", path, b.String())
}

func growthText(pct float64) string {
	if math.IsNaN(pct) || math.IsInf(pct, 0) {
		return "—"
	}
	s := fmt.Sprintf("%+.1f %%", pct)
	if pct > soakGrowthLimit {
		s = "**" + s + "**"
	}
	return s
}

// plots are the report's figures by file name: each path's p99 latency
// per sample period, and each component's RSS, open files and
// goroutines and each node's conntrack entries over the run; the faults
// are marked.
func (s *soak) plots() map[string]framework.LinePlot {
	minutes := func(at time.Time) float64 { return at.Sub(s.start).Minutes() }
	var marks []framework.Mark
	for _, f := range s.faults {
		marks = append(marks, framework.Mark{X: minutes(f.At), Label: f.Name})
	}
	xlabel := "minutes since the load started (dashed: faults)"
	latency := framework.LinePlot{Title: fmt.Sprintf("p99 latency per %v, per path", s.plan.SampleEvery), XLabel: xlabel, YLabel: "ms", Marks: marks}
	for _, path := range s.paths {
		ser := framework.Series{Name: path.name}
		for from := s.start; from.Before(s.end); from = from.Add(s.plan.SampleEvery) {
			to := from.Add(s.plan.SampleEvery)
			var in []loadgen.Outcome
			for _, o := range path.outcomes {
				if !o.At.Before(from) && o.At.Before(to) {
					in = append(in, o)
				}
			}
			if lat := latencies(in); len(lat) > 0 {
				ser.X = append(ser.X, minutes(from.Add(s.plan.SampleEvery/2)))
				ser.Y = append(ser.Y, float64(framework.Percentile(lat, 99).Microseconds())/1000)
			}
		}
		latency.Series = append(latency.Series, ser)
	}
	byKey := func(title, ylabel string, value func(procSample) float64) framework.LinePlot {
		plot := framework.LinePlot{Title: title, XLabel: xlabel, YLabel: ylabel, Marks: marks}
		series := map[string]*framework.Series{}
		last := map[string]int{}
		var keys []string
		for _, p := range s.samples {
			v := value(p)
			if math.IsNaN(v) {
				continue
			}
			ser := series[p.Key]
			if ser == nil {
				ser = &framework.Series{Name: p.Key}
				series[p.Key] = ser
				keys = append(keys, p.Key)
			} else if last[p.Key] != p.PID {
				// A new process: break the line.
				ser.X, ser.Y = append(ser.X, minutes(p.At)), append(ser.Y, math.NaN())
			}
			last[p.Key] = p.PID
			ser.X, ser.Y = append(ser.X, minutes(p.At)), append(ser.Y, v)
		}
		slices.Sort(keys)
		for _, k := range keys {
			plot.Series = append(plot.Series, *series[k])
		}
		return plot
	}
	conntrack := framework.LinePlot{Title: "conntrack entries per node (and the edge)", XLabel: xlabel, YLabel: "entries", Marks: marks}
	for _, where := range append(slices.Clone(soakNodes), "edge") {
		ser := framework.Series{Name: where}
		for _, c := range s.conntrack {
			if c.Where == where {
				ser.X, ser.Y = append(ser.X, minutes(c.At)), append(ser.Y, c.Entries)
			}
		}
		conntrack.Series = append(conntrack.Series, ser)
	}
	return map[string]framework.LinePlot{
		"latency.svg":    latency,
		"rss.svg":        byKey("resident memory per component", "MiB", func(p procSample) float64 { return p.RSS / (1 << 20) }),
		"fds.svg":        byKey("open files per component", "open files", func(p procSample) float64 { return p.FDs }),
		"goroutines.svg": byKey("goroutines per component (those that serve go_goroutines)", "goroutines", func(p procSample) float64 { return p.Goroutines }),
		"conntrack.svg":  conntrack,
	}
}

// check asserts what the soak promises: no request failed on any path,
// every fault recovered, every rollout completed, no acknowledged write
// lost, the churn cleaned up, and no component grew beyond the limit.
func (s *soak) check() {
	t := s.t
	for _, path := range s.paths {
		sent, failed, kinds := loadgen.Count(path.outcomes, s.start, s.end.Add(time.Hour))
		if sent == 0 {
			t.Errorf("%s: no request sent", path.name)
		}
		if failed > 0 {
			var at []string
			for _, o := range path.outcomes {
				if o.Kind != "" {
					at = append(at, fmt.Sprintf("%s at %s (%s) for %v during %s", o.Kind, o.At.Format("15:04:05.000"), s.clock(o.At), o.Took.Round(time.Millisecond), s.during(o.At, o.Took)))
				}
			}
			t.Errorf("%s: %d of %d failed (%s): %s", path.name, failed, sent, kindsText(kinds), strings.Join(at, "; "))
		}
		for _, o := range path.lost {
			t.Logf("%s: lost with a killed server: %s", path.name, o)
		}
	}
	for _, f := range s.faults {
		if !f.Recovered {
			t.Errorf("fault %s at %s (%s): %s", f.Name, s.clock(f.At), f.How, f.Problem)
		}
	}
	if want := len(s.faultTable()); len(s.faults) < want+1 {
		t.Errorf("%d faults struck, want every kind (%d) and the etcd member", len(s.faults), want)
	}
	if len(s.rollouts) == 0 {
		t.Error("no rollout")
	}
	for _, r := range s.rollouts {
		if r.Started() && !r.Complete {
			t.Errorf("rollout at %s: %s", s.clock(r.At), r.Problem)
		}
	}
	for _, o := range s.churnOps {
		if strings.HasPrefix(o.Result, "not found") {
			t.Errorf("%s %s at %s: %s", o.Kind, o.Name, s.clock(o.At), o.Result)
		}
	}
	if len(s.leftover) > 0 {
		t.Errorf("churn objects left 2 minutes after their deletion: %v", s.leftover)
	}
	if !s.growthAsserted() {
		t.Logf("growth not asserted: windows of %v are too short to tell a leak from a warm-up (%v at least)", s.plan.Window, soakMinGrowthWindow)
		return
	}
	for _, u := range s.usages() {
		if !u.comparable() {
			continue // two processes, or a standby that took the lead
		}
		if u.rssGrowth > soakGrowthLimit || u.fdGrowth > soakGrowthLimit {
			t.Errorf("%s grew: RSS %.1f → %.1f MiB (%+.1f %%), open files %.0f → %.0f (%+.1f %%), pids %v → %v",
				u.key, u.rssA/(1<<20), u.rssB/(1<<20), u.rssGrowth, u.fdsA, u.fdsB, u.fdGrowth, u.pidsA, u.pidsB)
		}
	}
}

// soakMinGrowthWindow is the shortest window whose growth is asserted:
// a short run's second sixth is still warm-up (caches filling, the churn's
// first objects), and a few samples are noise. Half an hour's soak and
// longer have it; shorter ones report the figures.
const soakMinGrowthWindow = 5 * time.Minute

func (s *soak) growthAsserted() bool { return s.plan.Window >= soakMinGrowthWindow }

// Started: the rollout's restart was accepted (a restart command that
// failed is an API request lost to a fault, reported as such).
func (r rolloutRecord) Started() bool {
	return !strings.HasPrefix(r.Problem, "kubectl rollout restart")
}

// TestSoakUsages: growth is compared between the second sixth and the
// last, by medians, and only for a component that ran as one process in
// one role throughout.
func TestSoakUsages(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	s := &soak{t: t, plan: newSoakPlan(6 * time.Minute), start: t0}
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	for _, tc := range []struct {
		key          string
		pidA, pidB   int
		leadA, leadB bool
		rssA, rssB   float64
		inB          bool
	}{
		{key: "steady", pidA: 1, pidB: 1, rssA: 100, rssB: 105, inB: true},
		{key: "restarted", pidA: 2, pidB: 3, rssA: 100, rssB: 150, inB: true},
		{key: "cp-1 controller-manager", pidA: 4, pidB: 4, leadB: true, rssA: 70, rssB: 90, inB: true},
		{key: "gone", pidA: 5, rssA: 100},
	} {
		// Three samples in each window; one before them (warm-up) that
		// would change the figures if counted.
		s.samples = append(s.samples, procSample{At: at(30), Key: tc.key, PID: tc.pidA, RSS: 1, FDs: 1, Goroutines: math.NaN()})
		for _, sec := range []int{60, 80, 100} {
			s.samples = append(s.samples, procSample{At: at(sec), Key: tc.key, PID: tc.pidA, RSS: tc.rssA, FDs: 10, Goroutines: math.NaN(), Leading: tc.leadA})
			if tc.inB {
				s.samples = append(s.samples, procSample{At: at(240 + sec), Key: tc.key, PID: tc.pidB, RSS: tc.rssB, FDs: 10, Goroutines: math.NaN(), Leading: tc.leadB})
			}
		}
	}
	got := map[string]usage{}
	for _, u := range s.usages() {
		got[u.key] = u
	}
	for _, tc := range []struct {
		key, note string
		growth    float64
		present   bool
	}{
		{"steady", "", 5, true},
		{"restarted", "restarted", 50, true},
		{"cp-1 controller-manager", "leader changed", 100 * (90.0/70 - 1), true},
		{"gone", "", 0, false},
	} {
		u, ok := got[tc.key]
		if ok != tc.present {
			t.Errorf("%s: in the comparison %v, want %v", tc.key, ok, tc.present)
			continue
		}
		if !ok {
			continue
		}
		if u.note() != tc.note || u.comparable() != (tc.note == "") || math.Abs(u.rssGrowth-tc.growth) > 1e-9 || u.fdGrowth != 0 {
			t.Errorf("%s: note %q, comparable %v, RSS growth %v, files %v; want note %q, RSS growth %v, files 0", tc.key, u.note(), u.comparable(), u.rssGrowth, u.fdGrowth, tc.note, tc.growth)
		}
	}
}

// TestChurnNotFound: a delete that finds nothing is a lost write only
// when no earlier delete of the object was cut off (it may have
// committed before its answer was lost).
func TestChurnNotFound(t *testing.T) {
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "ingresses"}, "x")
	tests := []struct {
		name    string
		earlier []error // earlier deletes of the object
		lost    bool
	}{
		{"first delete finds nothing", nil, true},
		{"after a delete cut off", []error{io.ErrUnexpectedEOF}, false},
		{"after a delete the API refused", []error{apierrors.NewServiceUnavailable("x")}, true},
	}
	for _, tt := range tests {
		s := &soak{}
		for _, err := range tt.earlier {
			s.recordChurn(time.Now(), "Ingress", "delete", "x", err)
		}
		s.recordChurn(time.Now(), "Ingress", "delete", "x", notFound)
		got := s.churnOps[len(s.churnOps)-1].Result
		if lost := strings.HasPrefix(got, "not found"); lost != tt.lost {
			t.Errorf("%s: result %q, lost %v, want %v", tt.name, got, lost, tt.lost)
		}
	}
}
