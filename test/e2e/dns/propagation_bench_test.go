package dns_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

var (
	benchPlot        = flag.String("dns.plot", "", "BenchmarkDNSPropagation: draw the latency distributions into this SVG file")
	benchSizes       = flag.String("dns.sizes", "10000,100000", "BenchmarkDNSPropagation: the numbers of Services to measure at, growing")
	benchRates       = flag.Int("dns.rate-rounds", 3, "BenchmarkDNSPropagation: dnsperf runs flat out per server and size; the best counts")
	benchPairs       = flag.Int("dns.rate-pairs", 8, "BenchmarkDNSPropagation: pairs of runs flat out at the smallest and the largest size in turns, per server (0: none)")
	benchPairSeconds = flag.Int("dns.rate-pair-seconds", 5, "BenchmarkDNSPropagation: length of each run of those pairs, in seconds")
)

// propagationNew is how many Services each size creates one at a time.
const propagationNew = 100

// outlier is a propagation time logged one by one, with when it was.
const outlier = 50 * time.Millisecond

// BenchmarkDNSPropagation grows one API server to 10,000 and then
// 100,000 ClusterIP Services and at each size measures, for `svcnet dns`
// and (with -dns.coredns) CoreDNS started on it:
//
//   - propagation: 100 new Services created one at a time, each timed
//     from the API's answer to the create to the first DNS answer with
//     its ClusterIP, both servers polled side by side every 500 µs;
//   - memory: each process's resident set once it answers, so the
//     difference between the sizes over 90,000 is the memory per
//     Service;
//   - the maximum query rate for the Service names (dnsperf, as
//     BenchmarkDNS10kServices);
//   - at the largest size, the ratio of that rate to the rate at the
//     smallest, from runs in turns against servers of both sizes at
//     once (pairedRates): the machine's speed drifts between the sizes'
//     measures by more than the zone's size changes the rate.
//
// CoreDNS runs as in BenchmarkDNS10kServices but without its cache
// plugin: with kubeadm's `cache 30`, the denial of a name asked before
// the informer has it is kept for 30 s, and that, not propagation, would
// be measured.
//
//	go test ./test/e2e/dns -run - -bench DNSPropagation -benchtime 1x -v -timeout 60m \
//	    -dns.coredns /tmp/coredns-bin/coredns -dns.plot docs/img/dns-propagation.svg
func BenchmarkDNSPropagation(b *testing.B) {
	if _, err := exec.LookPath("dnsperf"); err != nil {
		b.Skip("dnsperf not installed (Debian package dnsperf; make deps installs it)")
	}
	api := framework.StartAPIServer(b)
	client := api.Client()
	createKubeDNS(b, client)
	up := dnstest.StartUpstream(b)
	type result struct {
		lat      []time.Duration
		rss      float64 // bytes
		qps      float64
		firstQPS float64 // every name asked once, before the run of qps
	}
	results := map[string]map[int]*result{"svcnet": {}, "coredns": {}}
	var sizes []int
	for f := range strings.SplitSeq(*benchSizes, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || (len(sizes) > 0 && n <= sizes[len(sizes)-1]) {
			b.Fatalf("-dns.sizes %q: want growing numbers", *benchSizes)
		}
		sizes = append(sizes, n)
	}
	createBenchNamespaces(b, api)
	var names []string
	for _, n := range sizes {
		names = append(names, growServices(b, api, len(names), n)...)
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			// The same number of queries at every size (names repeated),
			// so that dnsperf, which keeps them all in memory, does the
			// same work at each: only the server's zone grows. (With one
			// line per Service the rate at 10,000 was the same.)
			queries := writeQueryLines(b, names, sizes[len(sizes)-1])
			// And every name once: the rate of first questions, which
			// svcnet answers the long way before its memo has them.
			firstQueries := writeQueryLines(b, names, len(names))
			last := names[len(names)-1]
			d := startDNS(b, api, up.Addr)
			servers := map[string]string{"svcnet": d.Addr}
			pids := map[string]int{"svcnet": d.proc.PID()}
			cpu := map[string]func() float64{"svcnet": func() float64 { return d.cpuSeconds(b) }}
			var cd *coreDNS
			if *benchCoreDNS != "" {
				cd = startCoreDNSConf(b, *benchCoreDNS, "", api.KubeconfigOf("dns"), up.Addr, false)
				servers["coredns"] = cd.addr
				pids["coredns"] = cd.proc.PID()
				cpu["coredns"] = func() float64 { return cpuSecondsAt(b, cd.metrics) }
			}
			for name, addr := range servers {
				waitAnswer(b, addr, last, 5*time.Minute)
				results[name][n] = &result{rss: rssBytes(b, pids[name])}
			}
			programmed0 := metricsAt(b, d.HTTP+"/metrics")
			for i := range propagationNew {
				at := time.Now()
				lat := createAndPoll(b, api, fmt.Sprintf("late-%d-%03d", n, i), servers)
				for name, l := range lat {
					results[name][n].lat = append(results[name][n].lat, l)
					if l > outlier {
						b.Logf("%s, %d Services: new Service %d of %d (created at %s) answered after %s",
							name, n, i+1, propagationNew, at.Format("15:04:05.000"), l.Round(time.Millisecond))
					}
				}
			}
			// svcnet's own part of the times above: from the change's
			// arrival to the zone answering with it. What is left of a
			// slow one was the API server's watch and the polling.
			b.Logf("svcnet, %d Services: the zone's programming of the changes (from their arrival): %s",
				n, framework.HistogramDelta(programmed0, metricsAt(b, d.HTTP+"/metrics"), "svcnet_dns_programming_duration_seconds"))
			for name, addr := range servers {
				r := results[name][n]
				slices.Sort(r.lat)
				// Every name asked once first, so that the run below is the
				// steady rate at both sizes; on its own, that first pass
				// is a tenth of the run at 100,000 Services and a hundredth
				// at 10,000, and its rate is reported apart.
				first := firstPassDNSPerf(b, newTarget(addr, "", nil), firstQueries)
				r.firstQPS = first.qps
				b.Logf("%s, %d Services: every name asked once: %.0f q/s over %s, %d‰ lost",
					name, n, first.qps, first.elapsed.Round(time.Millisecond), first.lostPermille)
				var prof chan []byte
				if *benchProfile != "" && name == "svcnet" {
					prof = d.profile(b, *benchSeconds-2) // the first run
				}
				var gc0 framework.Metrics
				if name == "svcnet" {
					gc0 = metricsAt(b, d.HTTP+"/metrics")
				}
				busy0, srv0, start := machineTicks(b), cpu[name](), time.Now()
				// The best of a few runs: the machine's speed drifts by a
				// fifth from one run to the next, more than the effect of
				// the zone's size, and a slow run is the machine's doing.
				var perf perfResult
				var clientCPU float64
				var rounds []string
				for range max(*benchRates, 1) {
					p := runDNSPerf(b, newTarget(addr, "", nil), queries, 0, false)
					clientCPU += p.clientCPU
					rounds = append(rounds, fmt.Sprintf("%.0f", p.qps))
					if p.qps > perf.qps {
						perf = p
					}
				}
				if prof != nil {
					if err := os.WriteFile(fmt.Sprintf("%s.%d", *benchProfile, n), <-prof, 0o644); err != nil {
						b.Error(err)
					}
				}
				r.qps = perf.qps
				// Where the machine's CPU went during the run: a rate that
				// drops with the zone's size for both servers alike may be
				// other processes' work (the API server's), not theirs.
				// Over the whole time of the runs, dnsperf's starts
				// between them included (each a fraction of a second).
				secs := time.Since(start).Seconds()
				busy, srv := float64(machineTicks(b)-busy0)/ticksPerSecond/secs, (cpu[name]()-srv0)/secs
				b.Logf("%s, %d Services, during the rate runs (%s q/s): machine busy %.2f cores; server %.2f, dnsperf %.2f, the rest %.2f",
					name, n, strings.Join(rounds, ", "), busy, srv, clientCPU/secs, busy-srv-clientCPU/secs)
				if name == "svcnet" {
					gc1 := metricsAt(b, d.HTTP+"/metrics")
					n0, pause0 := gc0.Observed("go_gc_duration_seconds")
					n1, pause1 := gc1.Observed("go_gc_duration_seconds")
					heap0, _ := gc0.Value("go_memstats_heap_alloc_bytes")
					heap1, _ := gc1.Value("go_memstats_heap_alloc_bytes")
					memo := func(result string) float64 {
						v0, _ := gc0.Value("svcnet_dns_memo_lookups_total", "result", result)
						v1, _ := gc1.Value("svcnet_dns_memo_lookups_total", "result", result)
						return v1 - v0
					}
					resets0, _ := gc0.Value("svcnet_dns_memo_resets_total")
					resets1, _ := gc1.Value("svcnet_dns_memo_resets_total")
					b.Logf("svcnet, %d Services, during the rate runs: %d garbage collections (%.3f s of pauses), heap %.0f → %.0f MiB; memo %.0f hits, %.0f misses, %.0f stale, %.0f resets",
						n, n1-n0, pause1-pause0, heap0/(1<<20), heap1/(1<<20), memo("hit"), memo("miss"), memo("stale"), resets1-resets0)
				}
				b.ReportMetric(ms(framework.Percentile(r.lat, 50)), name+"-p50-ms")
				b.ReportMetric(ms(framework.Percentile(r.lat, 99)), name+"-p99-ms")
				b.ReportMetric(ms(r.lat[len(r.lat)-1]), name+"-max-ms")
				b.ReportMetric(r.rss/(1<<20), name+"-rss-MiB")
				b.ReportMetric(r.qps, name+"-max-qps")
				b.ReportMetric(r.firstQPS, name+"-first-qps")
				b.Logf("%s, %d Services: new Service answered p50 %s p99 %s max %s after the create returned; RSS %.0f MiB; %.0f q/s flat out (every name asked once first: %.0f q/s)",
					name, n, framework.Percentile(r.lat, 50), framework.Percentile(r.lat, 99), r.lat[len(r.lat)-1], r.rss/(1<<20), r.qps, r.firstQPS)
			}
			if n == sizes[len(sizes)-1] && len(sizes) > 1 && *benchPairs > 0 {
				for name, ratio := range pairedRates(b, up.Addr, names[:sizes[0]], queries, len(names), sizes[len(sizes)-1], servers) {
					b.ReportMetric(ratio, name+"-rate-ratio")
				}
			}
			d.proc.Stop()
			if cd != nil {
				cd.proc.Stop()
			}
		})
	}
	for name, byN := range results {
		if a, z := byN[sizes[0]], byN[sizes[len(sizes)-1]]; a != nil && z != nil {
			per := (z.rss - a.rss) / float64(sizes[len(sizes)-1]-sizes[0])
			b.ReportMetric(per, name+"-bytes/service")
			b.Logf("%s: %.0f bytes of resident memory per Service (from %d to %d Services)", name, per, sizes[0], sizes[len(sizes)-1])
		}
	}
	if *benchPlot != "" {
		series := map[string][]time.Duration{}
		for name, byN := range results {
			for n, r := range byN {
				series[fmt.Sprintf("%s, %d Services", name, n)] = r.lat
			}
		}
		if err := os.WriteFile(*benchPlot, []byte(plotCDF(series)), 0o644); err != nil {
			b.Error(err)
		}
	}
}

// pairedRates compares the query rate of the servers given (by name:
// svcnet, coredns), whose zone is the large one, with that of the same
// servers on a zone of only the first small names: it starts a second
// API server with those, a server of each kind on it, asks every name
// once of each, then runs dnsperf flat out (lines queries, the same
// number at both sizes: largeQueries at the large zone, whose servers
// were asked every name already) at the small and the large zone in
// turns —
// small first, then large first, and so on, so that a drift of the
// machine's speed weighs on both alike. It returns, per server, the
// median of the ratios large/small of the pairs.
func pairedRates(b *testing.B, upstream string, small []string, largeQueries string, large, lines int, largeServers map[string]string) map[string]float64 {
	b.Helper()
	api := framework.StartAPIServer(b)
	createBenchNamespaces(b, api)
	growServices(b, api, 0, len(small))
	smallServers := map[string]string{}
	d := startDNS(b, api, upstream)
	defer d.proc.Stop()
	smallServers["svcnet"] = d.Addr
	if _, ok := largeServers["coredns"]; ok {
		cd := startCoreDNSConf(b, *benchCoreDNS, "", api.KubeconfigOf("dns"), upstream, false)
		defer cd.proc.Stop()
		smallServers["coredns"] = cd.addr
	}
	smallQueries := writeQueryLines(b, small, lines)
	smallOnce := writeQueryLines(b, small, len(small))
	out := map[string]float64{}
	for _, name := range slices.Sorted(maps.Keys(largeServers)) {
		waitAnswer(b, smallServers[name], small[len(small)-1], 5*time.Minute)
		firstPassDNSPerf(b, newTarget(smallServers[name], "", nil), smallOnce)
		var ratios []float64
		var pairs []string
		for i := range *benchPairs {
			rate := func(addr, file string) float64 {
				return execDNSPerf(b, newTarget(addr, "", nil), file, []string{"-l", strconv.Itoa(*benchPairSeconds)}, false).qps
			}
			var s, l float64
			if i%2 == 0 {
				s, l = rate(smallServers[name], smallQueries), rate(largeServers[name], largeQueries)
			} else {
				l, s = rate(largeServers[name], largeQueries), rate(smallServers[name], smallQueries)
			}
			ratios = append(ratios, l/s)
			pairs = append(pairs, fmt.Sprintf("%.0f/%.0f = %.3f", l, s, l/s))
		}
		out[name] = framework.Median(ratios)
		b.Logf("%s, rate at %d Services over the rate at %d, in pairs of runs in turns: %s; median %.3f",
			name, large, len(small), strings.Join(pairs, ", "), out[name])
	}
	return out
}

// growServices creates Services from index from to to (ClusterIP, over
// benchNamespaces namespaces, 64 writes at a time) and returns their
// names.
func growServices(b *testing.B, api *framework.APIServer, from, to int) []string {
	b.Helper()
	c := api.Client()
	ctx := context.Background()
	start := time.Now()
	work := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := range work {
				svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%06d", i)},
					Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
				if _, err := c.CoreV1().Services(fmt.Sprintf("ns-%02d", i%benchNamespaces)).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := from; i < to; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	b.Logf("created Services %d to %d in %s", from, to, time.Since(start).Round(time.Millisecond))
	var names []string
	for i := from; i < to; i++ {
		names = append(names, fmt.Sprintf("svc-%06d.ns-%02d.svc.cluster.local.", i, i%benchNamespaces))
	}
	return names
}

// createAndPoll creates one Service and asks every server for it every
// 500 µs from the moment the create returns; it returns how long each
// took to answer with the ClusterIP.
func createAndPoll(b *testing.B, api *framework.APIServer, name string, servers map[string]string) map[string]time.Duration {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	created, err := api.Client().CoreV1().Services("ns-00").Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	fqdn := name + ".ns-00.svc.cluster.local."
	var mu sync.Mutex
	out := map[string]time.Duration{}
	var wg sync.WaitGroup
	for server, addr := range servers {
		wg.Go(func() {
			c := &dns.Client{Net: "udp", Timeout: time.Second}
			req := new(dns.Msg)
			req.SetQuestion(fqdn, dns.TypeA)
			for {
				m, _, err := c.Exchange(req, addr)
				if err == nil && slices.Equal(addrs(m), []string{created.Spec.ClusterIP}) {
					break
				}
				if time.Since(start) > 30*time.Second {
					b.Errorf("%s: %s not answered 30 s after its creation", server, fqdn)
					return
				}
				time.Sleep(500 * time.Microsecond)
			}
			mu.Lock()
			out[server] = time.Since(start)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// waitAnswer waits until the server at addr answers name.
func waitAnswer(b *testing.B, addr, name string, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		m, err := ask(addr, name, time.Second)
		if err == nil && m.Rcode == dns.RcodeSuccess && len(m.Answer) > 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s does not answer %s after %s", addr, name, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rssBytes is a process's resident set size.
func rssBytes(b *testing.B, pid int) float64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb * 1024
		}
	}
	b.Fatalf("no VmRSS for pid %d", pid)
	return 0
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// plotCDF draws each series' latency distribution (the share of new
// Services answered within x), x on a log scale.
func plotCDF(series map[string][]time.Duration) string {
	const w, h, left, bottom, top, right = 720, 380, 60, 50, 30, 230
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, d := range s {
			v := math.Log10(max(ms(d), 0.1))
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	lo, hi = math.Floor(lo), math.Ceil(hi)
	if hi <= lo {
		hi = lo + 1
	}
	x := func(d time.Duration) float64 {
		return left + (math.Log10(max(ms(d), 0.1))-lo)/(hi-lo)*float64(w-left-right)
	}
	y := func(f float64) float64 { return float64(h-bottom) - f*float64(h-bottom-top) }
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&s, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&s, `<text x="%d" y="18" font-size="14">A new Service: time from the API's answer to the DNS answering it</text>`+"\n", left)
	fmt.Fprintf(&s, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&s, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, h-bottom)
	for e := lo; e <= hi; e++ {
		d := time.Duration(math.Pow(10, e) * float64(time.Millisecond))
		fmt.Fprintf(&s, `<line x1="%.0f" y1="%d" x2="%.0f" y2="%d" stroke="#ddd"/>`+"\n", x(d), top, x(d), h-bottom)
		fmt.Fprintf(&s, `<text x="%.0f" y="%d" text-anchor="middle">%s</text>`+"\n", x(d), h-bottom+18, strconv.FormatFloat(math.Pow(10, e), 'g', -1, 64)+" ms")
	}
	for k := 0; k <= 4; k++ {
		f := float64(k) / 4
		fmt.Fprintf(&s, `<text x="%d" y="%.0f" text-anchor="end">%d%%</text>`+"\n", left-6, y(f)+4, k*25)
	}
	fmt.Fprintf(&s, `<text x="%d" y="%d" text-anchor="middle">latency (log scale); y: share of new Services answered</text>`+"\n", (left+w-right)/2, h-12)
	colors := []string{"#1f77b4", "#aec7e8", "#d62728", "#ff9896"}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range series {
			if !yield(k) {
				return
			}
		}
	})
	// svcnet first, the smaller size first.
	slices.SortFunc(keys, func(a, b string) int {
		if c := strings.Compare(strings.SplitN(b, ",", 2)[0], strings.SplitN(a, ",", 2)[0]); c != 0 {
			return c
		}
		return cmp.Or(len(a)-len(b), strings.Compare(a, b))
	})
	for i, k := range keys {
		lat := series[k]
		var pts []string
		for j, d := range lat {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(d), y(float64(j)/float64(len(lat))), x(d), y(float64(j+1)/float64(len(lat)))))
		}
		c := colors[i%len(colors)]
		fmt.Fprintf(&s, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), c)
		fmt.Fprintf(&s, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", w-right+10, top+20+20*i, c, k)
	}
	s.WriteString("</svg>\n")
	return s.String()
}

// ticksPerSecond is USER_HZ, the unit of /proc's CPU times.
const ticksPerSecond = 100

// machineTicks is the CPU time all CPUs have spent busy so far (/proc/stat:
// all but idle and iowait).
func machineTicks(b *testing.B) uint64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	var busy uint64
	for i, f := range strings.Fields(line)[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			b.Fatalf("/proc/stat: %q", line)
		}
		if i != 3 && i != 4 && i < 8 { // idle, iowait; guest times are in user already
			busy += v
		}
	}
	return busy
}
