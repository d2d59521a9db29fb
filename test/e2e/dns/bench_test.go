package dns_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/internal/dns/server"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// The scale of the reference CoreDNS measurement (docs/benchmarks.md).
const (
	benchServices   = 10000
	benchNamespaces = 20
	benchExternal   = 1000
)

var (
	benchSeconds = flag.Int("dns.seconds", 10, "length of each dnsperf run, in seconds")
	benchFixed   = flag.Int("dns.fixed-qps", 50000, "also hold this rate (1.5x CoreDNS's maximum for cluster names in docs/benchmarks.md' reference figures) and report its latency; 0 skips it")
	benchLayouts = flag.String("dns.layouts", "shared,split", "where the server and dnsperf run: shared (all cores for both), split (server on CPU 0, dnsperf on CPU 1), or both, comma-separated")
	benchCoreDNS = flag.String("dns.coredns", "", "also measure this CoreDNS binary the same way, side by side (go install github.com/coredns/coredns@v1.14.7)")
	benchClients = flag.Int("dns.clients", 1, "dnsperf's clients (-c): each its own socket, which the kernel may give to another of svcnet's read loops")
	benchProfile = flag.String("dns.cpuprofile", "", "write a CPU profile of svcnet dns during the cluster-name maximum-rate run to this file (BenchmarkDNSPropagation: to this file.N at N Services)")
)

// BenchmarkDNS10kServices measures `svcnet dns` with dnsperf on this
// machine: the maximum rate and the latency at 80 % of it, for cluster
// names, outside names answered from the cache, and NXDOMAIN, with
// 10,000 Services in the zone. Run it with
//
//	go test ./test/e2e/dns -run - -bench DNS10k -benchtime 1x
//
// It measures two layouts (-dns.layouts): "shared", where dnsperf and the
// server share all the machine's cores as in the reference CoreDNS figures,
// and "split", where the server is bound to CPU 0 and dnsperf to CPU 1,
// as dnsperf's own documentation asks (the load generator must not take
// the server's CPU). On two cores the shared layout's tail is the
// scheduler time-slicing four busy threads on two cores.
//
// Each class runs three times: once flat out (dnsperf -q 100, the rate
// is the maximum), then held with -Q at 80 % of that rate and at
// -dns.fixed-qps, where each query's latency is read from dnsperf -v.
// Last, floor-echo measures a responder that does no DNS work the same
// way, which is what dnsperf, the kernel and the scheduler cost alone.
func BenchmarkDNS10kServices(b *testing.B) {
	if _, err := exec.LookPath("dnsperf"); err != nil {
		b.Skip("dnsperf not installed (Debian package dnsperf; make deps installs it)")
	}
	var layouts []benchLayout
	for l := range strings.SplitSeq(*benchLayouts, ",") {
		switch l {
		case "shared":
			layouts = append(layouts, benchLayout{name: l})
		case "split":
			if runtime.NumCPU() < 2 {
				b.Fatalf("layout split needs two CPUs, this process may use %d", runtime.NumCPU())
			}
			layouts = append(layouts, benchLayout{name: l, server: "0", client: "1"})
		default:
			b.Fatalf("-dns.layouts: unknown layout %q (shared, split)", l)
		}
	}
	api := framework.StartAPIServer(b)
	client := api.Client()
	names := createBenchServices(b, api)
	createKubeDNS(b, client)

	up := dnstest.StartUpstream(b)
	var external []string
	for i := range benchExternal {
		n := fmt.Sprintf("host-%04d.example.org.", i)
		up.Add(b, n+" 3600 IN A 192.0.2."+strconv.Itoa(1+i%250))
		external = append(external, n)
	}
	var nx []string
	for i := range benchServices {
		nx = append(nx, fmt.Sprintf("nope-%05d.ns-%02d.svc.cluster.local.", i, i%benchNamespaces))
	}
	classes := []struct {
		name string
		file string
	}{
		{"cluster", writeQueries(b, names)},
		{"external-cached", writeQueries(b, external)},
		{"nxdomain", writeQueries(b, nx)},
	}
	b.ResetTimer()
	for i, l := range layouts {
		d := startDNSOnCPUs(b, l.server, api, up.Addr)
		prepare(b, d.Addr, names[len(names)-1], external)
		if i == 0 {
			b.Run("new-service", func(b *testing.B) { benchNewService(b, api, d) })
		}
		var clusterHeld int
		for _, c := range classes {
			b.Run(l.name+"/"+c.name, func(b *testing.B) {
				var prof chan []byte
				if *benchProfile != "" && c.name == "cluster" && i == 0 {
					prof = d.profile(b, *benchSeconds-2)
				}
				held := measure(b, c.name, newTarget(d.Addr, l.client, func() float64 { return d.cpuSeconds(b) }), c.file, prof)
				if c.name == "cluster" {
					clusterHeld = held
				}
			})
		}
		d.proc.Stop()
		if *benchCoreDNS != "" {
			cd := startCoreDNS(b, *benchCoreDNS, l.server, api.KubeconfigOf("dns"), up.Addr)
			prepare(b, cd.addr, names[len(names)-1], external)
			for _, c := range classes {
				b.Run(l.name+"/coredns-"+c.name, func(b *testing.B) {
					measure(b, "coredns "+c.name, newTarget(cd.addr, l.client, func() float64 { return cpuSecondsAt(b, cd.metrics) }), c.file, nil)
				})
			}
			cd.proc.Stop()
		}
		// The machine's floor: a UDP responder that does no DNS work at
		// all (it flips the query into a reply), measured the same way,
		// also at the rate the cluster names were held at. What latency it
		// shows is dnsperf's, the kernel's and the scheduler's.
		b.Run(l.name+"/floor-echo", func(b *testing.B) {
			t := newTarget(startEcho(b, l.server), l.client, nil)
			measure(b, "floor-echo", t, classes[0].file, nil)
			if clusterHeld > 0 {
				r := runDNSPerf(b, t, classes[0].file, clusterHeld, true)
				b.ReportMetric(float64(r.p99.Microseconds())/1000, "cluster-rate-p99-ms")
				b.Logf("floor-echo: at the cluster names' held rate %.0f q/s: p50 %s p99 %s p99.9 %s", r.qps, r.p50, r.p99, r.p999)
			}
		})
	}
}

// prepare waits until the server at addr answers last, the last Service
// created, and warms its cache with the outside names, so that the
// external class measures cache hits.
func prepare(b *testing.B, addr, last string, external []string) {
	start := time.Now()
	for {
		m, err := ask(addr, last, time.Second)
		if err == nil && len(m.Answer) == 1 {
			break
		}
		if time.Since(start) > time.Minute {
			b.Fatalf("%s: %s not answered a minute after the last create", addr, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, n := range external {
		if m, err := ask(addr, n, time.Second); err != nil || len(m.Answer) != 1 {
			b.Fatalf("warming %s: %v %v", n, summary(m), err)
		}
	}
}

// ask sends one A question to addr over UDP.
func ask(addr, name string, timeout time.Duration) (*dns.Msg, error) {
	req := new(dns.Msg)
	req.SetQuestion(name, dns.TypeA)
	c := &dns.Client{Timeout: timeout}
	m, _, err := c.Exchange(req, addr)
	return m, err
}

// benchLayout says which CPUs the server and dnsperf are bound to ("" for
// any).
type benchLayout struct {
	name, server, client string
}

// target is what dnsperf asks: host:port, from the CPUs in cpus ("" for
// any); cpu, when set, reads the server's CPU seconds.
type target struct {
	host, port, cpus string
	cpu              func() float64
}

func newTarget(addr, cpus string, cpu func() float64) target {
	host, port, _ := strings.Cut(addr, ":")
	return target{host, port, cpus, cpu}
}

// benchNewService creates Services one at a time with 10,000 in the zone
// and times each from the create call to the first answer with its
// ClusterIP (polled every 2 ms): the issue's "a new Service resolves
// within a second", at scale, where every change rebuilds the zone.
func benchNewService(b *testing.B, api *framework.APIServer, d *dnsServer) {
	const n = 20
	c := api.Client()
	ctx := context.Background()
	var lat []time.Duration
	for i := range n {
		name := fmt.Sprintf("late-%02d", i)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		start := time.Now()
		created, err := c.CoreV1().Services("ns-00").Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		fqdn := name + ".ns-00.svc.cluster.local."
		for {
			m, err := d.exchange("udp", fqdn, dns.TypeA, time.Second)
			if err == nil && slices.Equal(addrs(m), []string{created.Spec.ClusterIP}) {
				break
			}
			if time.Since(start) > 10*time.Second {
				b.Fatalf("%s not answered 10 s after its creation", fqdn)
			}
			time.Sleep(2 * time.Millisecond)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	builds, buildSum := metricsAt(b, d.HTTP+"/metrics").Observed("svcnet_dns_zone_build_duration_seconds")
	meanBuild := time.Duration(buildSum / float64(max(builds, 1)) * float64(time.Second))
	b.ReportMetric(float64(lat[n/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[n-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(meanBuild.Microseconds())/1000, "zone-build-ms")
	b.Logf("new Service to answer, %d Services, 10,000 in the zone: median %s, slowest %s; zone rebuilt %d times, %s on average",
		n, lat[n/2].Round(time.Millisecond), lat[n-1].Round(time.Millisecond), builds, meanBuild.Round(100*time.Microsecond))
}

// measure runs dnsperf flat out, then held at 80 % of that rate and at
// -dns.fixed-qps, reports the figures and returns the held rate. prof,
// when set, is a profile being taken during the flat-out run.
func measure(b *testing.B, name string, t target, file string, prof chan []byte) int {
	cpu := t.cpu
	var cpu0, cpu1 float64
	if cpu != nil {
		cpu0 = cpu()
	}
	max := runDNSPerf(b, t, file, 0, false)
	if cpu != nil {
		cpu1 = cpu()
	}
	if prof != nil {
		if err := os.WriteFile(*benchProfile, <-prof, 0o644); err != nil {
			b.Error(err)
		}
	}
	rate := int(max.qps * 0.8)
	held := runDNSPerf(b, t, file, rate, true)
	if *benchFixed > 0 {
		fixed := runDNSPerf(b, t, file, *benchFixed, true)
		b.ReportMetric(float64(fixed.p99.Microseconds())/1000, "fixed-p99-ms")
		b.Logf("%s: at %.0f q/s: p50 %s p99 %s p99.9 %s, lost %.1f%%", name, fixed.qps, fixed.p50, fixed.p99, fixed.p999,
			float64(fixed.lostPermille)/10)
	}
	b.ReportMetric(max.qps, "max-qps")
	b.ReportMetric(float64(max.lostPermille)/10, "max-lost-%")
	b.ReportMetric(max.avg.Seconds()*1000, "max-avg-ms")
	if cpu != nil {
		b.ReportMetric((cpu1-cpu0)/max.elapsed.Seconds(), "server-cores")
	}
	b.ReportMetric(max.clientCPU/max.elapsed.Seconds(), "dnsperf-cores")
	b.ReportMetric(held.qps, "80%-qps")
	b.ReportMetric(float64(held.p50.Microseconds())/1000, "80%-p50-ms")
	b.ReportMetric(float64(held.p99.Microseconds())/1000, "80%-p99-ms")
	b.ReportMetric(float64(held.p999.Microseconds())/1000, "80%-p99.9-ms")
	b.ReportMetric(float64(held.lostPermille)/10, "80%-lost-%")
	b.Logf("%s: max %.0f q/s (avg latency %s, lost %.1f%%, server %.2f cores, dnsperf %.2f cores); at %.0f q/s: p50 %s p99 %s p99.9 %s, lost %.1f%%",
		name, max.qps, max.avg, float64(max.lostPermille)/10, (cpu1-cpu0)/max.elapsed.Seconds(), max.clientCPU/max.elapsed.Seconds(),
		held.qps, held.p50, held.p99, held.p999, float64(held.lostPermille)/10)
	return rate
}

// echoEnv, set in its environment, makes the test binary the floor
// responder instead of running tests (see TestMain).
const echoEnv = "SVCNET_DNS_BENCH_ECHO"

func TestMain(m *testing.M) {
	if os.Getenv(echoEnv) != "" {
		runEcho()
		return
	}
	os.Exit(m.Run())
}

// startEcho runs the floor responder on 127.0.0.1, as a process of its
// own bound to cpus ("" for any) as the server is, until the benchmark
// ends, and returns its address.
func startEcho(b *testing.B, cpus string) string {
	b.Helper()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := framework.CommandOnCPUs(cpus, self)
	cmd.Env = append(os.Environ(), echoEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("floor responder: %v", err)
	}
	return strings.TrimSpace(addr)
}

// runEcho is the floor responder: GOMAXPROCS loops of recvmmsg, set QR
// and NXDOMAIN, sendmmsg, each on a socket of its own in one
// SO_REUSEPORT group — the server's socket layout and batch I/O, none of
// its work. It prints its address and runs until killed.
func runEcho() {
	group, err := server.ListenUDPGroup(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}, runtime.GOMAXPROCS(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(group[0].LocalAddr())
	for _, c := range group {
		go echoLoop(ipv4.NewPacketConn(c))
	}
	select {}
}

func echoLoop(pc *ipv4.PacketConn) {
	ms := make([]ipv4.Message, 32)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, 4096)}
	}
	for {
		n, err := pc.ReadBatch(ms, 0)
		if err != nil {
			continue
		}
		out := make([]ipv4.Message, 0, n)
		for _, m := range ms[:n] {
			p := m.Buffers[0][:m.N]
			if len(p) < 12 {
				continue
			}
			p[2] |= 0x80
			p[3] = p[3]&0xf0 | dns.RcodeNameError
			out = append(out, ipv4.Message{Buffers: [][]byte{p}, Addr: m.Addr})
		}
		for len(out) > 0 {
			k, err := pc.WriteBatch(out, 0)
			if err != nil {
				k = max(k, 1)
			}
			out = out[k:]
		}
	}
}

// createBenchServices makes benchNamespaces namespaces and
// benchServices ClusterIP Services over them, and returns their names.
func createBenchServices(b *testing.B, api *framework.APIServer) []string {
	b.Helper()
	createBenchNamespaces(b, api)
	return growServices(b, api, 0, benchServices)
}

// createBenchNamespaces makes the namespaces ns-00 … that the
// benchmarks' Services go in.
func createBenchNamespaces(b *testing.B, api *framework.APIServer) {
	b.Helper()
	c := api.Client()
	for i := range benchNamespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns-%02d", i)}}
		if _, err := c.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// writeQueries writes a dnsperf data file: the names in random order, so
// that no cache line or map bucket is favoured by the order.
func writeQueries(b *testing.B, names []string) string {
	return writeQueryLines(b, names, len(names))
}

// writeQueryLines writes at least lines queries, names repeated as needed,
// in a shuffled order.
func writeQueryLines(b *testing.B, names []string, lines int) string {
	b.Helper()
	shuffled := slices.Clone(names)
	for len(shuffled) < lines {
		shuffled = append(shuffled, names[:min(len(names), lines-len(shuffled))]...)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	var sb strings.Builder
	for _, n := range shuffled {
		sb.WriteString(n + " A\n")
	}
	f := filepath.Join(b.TempDir(), "queries")
	if err := os.WriteFile(f, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return f
}

type perfResult struct {
	qps            float64
	avg            time.Duration
	lostPermille   int
	elapsed        time.Duration
	clientCPU      float64 // seconds of CPU dnsperf used
	p50, p99, p999 time.Duration
}

var (
	qpsLine     = regexp.MustCompile(`Queries per second:\s+([\d.]+)`)
	avgLine     = regexp.MustCompile(`Average Latency \(s\):\s+([\d.]+)`)
	sentLine    = regexp.MustCompile(`Queries sent:\s+(\d+)`)
	lostLine    = regexp.MustCompile(`Queries lost:\s+(\d+)`)
	runTimeLine = regexp.MustCompile(`Run time \(s\):\s+([\d.]+)`)
)

// runDNSPerf runs dnsperf against host:port for -dns.seconds, flat out
// with 100 queries outstanding, or held at rate with per-query latencies.
// Only loopback is ever asked: host comes from the server's --listen.
func runDNSPerf(b *testing.B, t target, file string, rate int, verbose bool) perfResult {
	b.Helper()
	limit := []string{"-l", strconv.Itoa(*benchSeconds)}
	if rate > 0 {
		limit = append(limit, "-Q", strconv.Itoa(rate))
	}
	return execDNSPerf(b, t, file, limit, verbose)
}

// firstPassDNSPerf runs dnsperf flat out through file once: every
// question asked once before, if file holds each once.
func firstPassDNSPerf(b *testing.B, t target, file string) perfResult {
	b.Helper()
	// A short timeout: the pass is a few seconds, and one datagram lost
	// at its end would otherwise add dnsperf's 2 s wait to its time.
	return execDNSPerf(b, t, file, []string{"-n", "1", "-t", "0.2"}, false)
}

// execDNSPerf runs dnsperf with limit (how long or how far, how fast)
// and reads its summary (and with verbose every latency).
func execDNSPerf(b *testing.B, t target, file string, limit []string, verbose bool) perfResult {
	b.Helper()
	if t.host != "127.0.0.1" {
		b.Fatalf("refusing to run dnsperf against %s: loopback only", t.host)
	}
	args := append([]string{"-s", t.host, "-p", t.port, "-d", file, "-q", "100", "-t", "2", "-c", strconv.Itoa(*benchClients)}, limit...)
	if verbose {
		args = append(args, "-v")
	}
	// dnsperf writes to a file, read afterwards: parsing its -v lines
	// while it runs would take CPU from dnsperf and the server.
	outPath := filepath.Join(b.TempDir(), "dnsperf.out")
	outFile, err := os.Create(outPath)
	if err != nil {
		b.Fatal(err)
	}
	defer outFile.Close()
	cmd := framework.CommandOnCPUs(t.cpus, "dnsperf", args...)
	cmd.Stdout = outFile
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("dnsperf %v: %v\n%s", args, err, stderr.String())
	}
	if _, err := outFile.Seek(0, 0); err != nil {
		b.Fatal(err)
	}
	var r perfResult
	var lat []time.Duration
	var summaryText strings.Builder
	sc := bufio.NewScanner(outFile)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "> "); ok {
			// "> NOERROR name A 0.000123"
			if i := strings.LastIndexByte(rest, ' '); i >= 0 {
				if s, err := strconv.ParseFloat(rest[i+1:], 64); err == nil {
					lat = append(lat, time.Duration(s*float64(time.Second)))
				}
			}
			continue
		}
		summaryText.WriteString(line + "\n")
	}
	r.clientCPU = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	out := summaryText.String()
	num := func(re *regexp.Regexp) float64 {
		m := re.FindStringSubmatch(out)
		if m == nil {
			b.Fatalf("dnsperf output lacks %s:\n%s", re, out)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	r.qps = num(qpsLine)
	r.avg = time.Duration(num(avgLine) * float64(time.Second))
	r.elapsed = time.Duration(num(runTimeLine) * float64(time.Second))
	if sent := num(sentLine); sent > 0 {
		r.lostPermille = int(num(lostLine) * 1000 / sent)
	}
	if verbose {
		if len(lat) == 0 {
			b.Fatalf("dnsperf -v printed no latencies:\n%s", out)
		}
		slices.Sort(lat)
		pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*p))] }
		r.p50, r.p99, r.p999 = pct(0.50), pct(0.99), pct(0.999)
	}
	b.Logf("dnsperf %s: %.0f q/s, %.0f sent, %.0f lost, average latency %s", strings.Join(args, " "),
		r.qps, num(sentLine), num(lostLine), r.avg)
	return r
}
