package ingress_test

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

var (
	benchSeconds = flag.Int("ingress.seconds", 10, "length of each wrk run, in seconds")
	benchNginx   = flag.String("ingress.nginx", "nginx", "the nginx binary measured beside svcnet ingress (Debian's nginx-light; make bench-deps installs it)")
	benchConns   = flag.String("ingress.connections", "50,200", "wrk connections, comma-separated")
	benchProfile = flag.String("ingress.cpuprofile", "", "write a CPU profile of svcnet ingress during its first wrk run to this file")
	benchRounds  = flag.Int("ingress.rounds", 3, "wrk runs per proxy and connection count; the median is reported")
	benchArgs    = flag.String("ingress.args", "", "more flags for svcnet ingress, space-separated (e.g. --event-loops 2)")
)

// nginxIP is where nginx listens, beside the ingress in its namespace.
const nginxIP = "10.77.0.2"

// plainPod serves its name as text, the cheapest backend there is, so
// that the proxies are what the figures differ by.
func (e *env) plainPod(name string) string {
	ip := e.podIP()
	l := e.ns.Listen("tcp", fmt.Sprintf("%s:%d", ip, podPort))
	body := []byte(name)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) })}
	go srv.Serve(l)
	e.t.Cleanup(func() { srv.Close() })
	return ip
}

// nginxConf is nginx as a reverse proxy the way nginx-based ingress
// controllers configure it: upstream keep-alive, HTTP/1.1 to the pods,
// the same forwarded headers; no access log (svcnet runs without one in
// the comparison too). extra goes into the http block as it is.
func nginxConf(dir string, upstreams []string, extra string) string {
	var servers strings.Builder
	for _, u := range upstreams {
		fmt.Fprintf(&servers, "    server %s:%d;\n", u, podPort)
	}
	return fmt.Sprintf(`worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  keepalive_timeout 75s;
  keepalive_requests 100000;
  upstream bench {
%[2]s    keepalive 256;
    keepalive_requests 100000;
  }
  server {
    listen %[3]s:80 reuseport;
    server_name bench.example;
    location / {
      proxy_pass http://bench;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Real-IP $remote_addr;
      proxy_set_header X-Forwarded-For $remote_addr;
      proxy_set_header X-Forwarded-Host $host;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Port $server_port;
      proxy_set_header X-Request-ID $request_id;
      proxy_connect_timeout 5s;
      proxy_read_timeout 60s;
    }
  }
%[4]s}
`, dir, servers.String(), nginxIP, extra)
}

// nginxProxy is nginx beside the ingress, in front of the same pods.
type nginxProxy struct {
	e         *env
	dir, conf string
	extra     string // more of the http block
	proc      *framework.Process
}

// startNginx runs nginx at nginxIP with an upstream of the pods, and
// extra in its http block.
func (e *env) startNginx(pods []string, extra ...string) *nginxProxy {
	n := &nginxProxy{e: e, dir: e.t.TempDir(), extra: strings.Join(extra, "")}
	for _, d := range []string{"body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		_ = os.MkdirAll(filepath.Join(n.dir, d), 0o755)
	}
	n.conf = filepath.Join(n.dir, "nginx.conf")
	n.write(pods)
	e.ns.IP("addr", "add", nginxIP+"/32", "dev", "lo")
	n.proc = framework.StartCommandOnCPUs(e.t, "", "ip", "netns", "exec", e.ns.Name, *benchNginx, "-c", n.conf, "-g", "daemon off;")
	return n
}

// write rewrites the configuration with an upstream of the pods.
func (n *nginxProxy) write(pods []string) {
	if err := os.WriteFile(n.conf, []byte(nginxConf(n.dir, pods, n.extra)), 0o644); err != nil {
		n.e.t.Fatal(err)
	}
}

// reload makes nginx read its configuration again, as nginx-based
// ingress controllers do on every change.
func (n *nginxProxy) reload() {
	if out, err := n.e.ns.Try(*benchNginx, "-c", n.conf, "-g", "daemon off;", "-s", "reload"); err != nil {
		n.e.t.Fatalf("nginx reload: %v\n%s", err, out)
	}
}

// wrkResult is what one wrk run reports.
type wrkResult struct {
	rps          float64
	p50, p99     time.Duration
	non2xx       int
	socketErrors string
	cpuPer1000   time.Duration // CPU the proxy used per 1,000 requests
	// The pods' (this process's) and the whole machine's, wrk's included
	podsPer1000, machinePer1000 time.Duration
	requestsTotal               int
}

var (
	wrkRPS      = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	wrkTotal    = regexp.MustCompile(`(\d+) requests in`)
	wrkPct      = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$`)
	wrkNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	wrkSockErrs = regexp.MustCompile(`Socket errors: (.*)`)
)

func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	m := wrkRPS.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no Requests/sec in wrk's output:\n%s", out)
	}
	r.rps, _ = strconv.ParseFloat(m[1], 64)
	if m := wrkTotal.FindStringSubmatch(out); m != nil {
		r.requestsTotal, _ = strconv.Atoi(m[1])
	}
	for _, m := range wrkPct.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[m[3]]
		d := time.Duration(v * float64(unit))
		if m[1] == "50" {
			r.p50 = d
		} else {
			r.p99 = d
		}
	}
	if m := wrkNon2xx.FindStringSubmatch(out); m != nil {
		r.non2xx, _ = strconv.Atoi(m[1])
	}
	if m := wrkSockErrs.FindStringSubmatch(out); m != nil {
		r.socketErrors = m[1]
	}
	return r, nil
}

// cpuOf is the CPU time used so far by pid and its children that are
// still running (nginx's workers).
func cpuOf(pid int) time.Duration {
	ticks := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// Fields after the command name (which may hold spaces).
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
		ppid, _ := strconv.Atoi(f[1])
		if p != pid && ppid != pid {
			continue
		}
		u, _ := strconv.Atoi(f[11])
		s, _ := strconv.Atoi(f[12])
		ticks += u + s
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// BenchmarkIngressVsNginx measures svcnet ingress and nginx side by side
// in one run, in front of the same four pods: wrk from the namespace at
// each -ingress.connections, rps, p50/p99 and the proxy's CPU per 1,000
// requests. Run it with
//
//	make bench-deps   # wrk, nginx-light (not started as a service)
//	go test ./test/e2e/ingress -run - -bench IngressVsNginx -benchtime 1x
func BenchmarkIngressVsNginx(b *testing.B) {
	for _, tool := range []string{"wrk", *benchNginx} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Fatalf("%s is not installed: make bench-deps installs wrk and nginx-light", tool)
		}
	}
	args := append([]string{"--access-log", "off"}, strings.Fields(*benchArgs)...)
	if *benchProfile != "" {
		args = append(args, "--profiling")
	}
	e := newEnv(b, args...)
	var pods []string
	for i := range 4 {
		pods = append(pods, e.plainPod(fmt.Sprintf("bench-%d", i+1)))
	}
	e.service("default", "bench", pods...)
	e.hostIngress("bench", "bench.example", "bench")
	e.eventually("the bench route", func() error {
		if code, _ := e.get("bench.example", "/"); code != 200 {
			return fmt.Errorf("status %d", code)
		}
		return nil
	})
	ng := e.startNginx(pods)
	nginx := ng.proc
	e.eventually("nginx answers", func() error {
		return e.getOK(e.ns.HTTPClient(time.Second), "http://"+nginxIP+"/", "bench.example")
	})

	targets := [2]benchTarget{
		{name: "svcnet", ip: ingressIP, pid: e.ingress.PID()},
		{name: "nginx", ip: nginxIP, pid: nginx.PID()},
	}
	b.ResetTimer()
	e.pairedRounds(b, targets)
}

// pairedRounds measures the two targets with wrk at each
// -ingress.connections, -ingress.rounds times, and reports each one's
// median round (rps, p99) and the medians of the rounds' ratios, the
// first over the second (pairs-c<connections>-rate-ratio and -p99-ratio),
// with a table of the median rounds in its log.
func (e *env) pairedRounds(b *testing.B, targets [2]benchTarget) {
	a, ref := targets[0].name, targets[1].name
	var table []string
	for conns := range strings.SplitSeq(*benchConns, ",") {
		// The machine's speed drifts between runs by up to a third, for
		// both proxies alike: rounds alternate which goes first, and
		// each proxy's median round is reported.
		rounds := map[string][]wrkResult{}
		var rateRatios, p99Ratios []float64
		for round := range *benchRounds {
			order := targets
			if round%2 == 1 {
				order = [2]benchTarget{targets[1], targets[0]}
			}
			for _, tg := range order {
				r := e.wrkRun(b, tg, conns)
				b.Logf("round %d: %s pods %v, machine %v per 1,000", round+1, r.row(tg.name, conns),
					r.podsPer1000.Round(time.Millisecond/10), r.machinePer1000.Round(time.Millisecond/10))
				rounds[tg.name] = append(rounds[tg.name], r)
			}
			s, n := rounds[a][round], rounds[ref][round]
			rateRatios = append(rateRatios, s.rps/n.rps)
			p99Ratios = append(p99Ratios, float64(s.p99)/float64(n.p99))
		}
		median := map[string]float64{}
		for _, tg := range targets {
			rs := rounds[tg.name]
			sort.Slice(rs, func(i, j int) bool { return rs[i].rps < rs[j].rps })
			r := rs[len(rs)/2]
			median[tg.name] = r.rps
			name := tg.name + "-c" + conns
			b.ReportMetric(r.rps, name+"-rps")
			b.ReportMetric(float64(r.p99.Microseconds()), name+"-p99-µs")
			table = append(table, r.row(tg.name, conns))
		}
		b.Logf("%s connections: %s's median rate is %.2f× %s's", conns, a, median[a]/median[ref], ref)
		// The two runs of a round are seconds apart, so their ratio is
		// the least touched by the machine's drift: the medians of the
		// rounds' ratios are what the targets are read from.
		rate, p99 := framework.Median(rateRatios), framework.Median(p99Ratios)
		b.ReportMetric(rate, "pairs-c"+conns+"-rate-ratio")
		b.ReportMetric(p99, "pairs-c"+conns+"-p99-ratio")
		b.Logf("%s connections, rounds' %s/%s ratios: rate %s (median %.3f), p99 %s (median %.3f)",
			conns, a, ref, ratios(rateRatios), rate, ratios(p99Ratios), p99)
	}
	b.Logf("\n| proxy | connections | requests/s | p50 | p99 | CPU per 1,000 requests | errors |\n|---|---|---|---|---|---|---|\n%s", strings.Join(table, "\n"))
}

func ratios(xs []float64) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%.3f", x))
	}
	return strings.Join(parts, " ")
}

type benchTarget struct {
	name, ip string
	pid      int
	port     int // 0 for 80
}

// url is where wrk sends its requests.
func (tg benchTarget) url() string {
	if tg.port != 0 {
		return fmt.Sprintf("http://%s:%d/", tg.ip, tg.port)
	}
	return "http://" + tg.ip + "/"
}

// wrkRun measures one proxy once at conns connections, after a short
// warm-up that fills the keep-alive pools.
func (e *env) wrkRun(b *testing.B, tg benchTarget, conns string) wrkResult {
	_, _ = e.ns.Try("wrk", "-t2", "-c"+conns, "-d1s", "-H", "Host: bench.example", tg.url())
	profiled := make(chan error, 1)
	if *benchProfile != "" && tg.name == "svcnet" {
		path := *benchProfile
		go func() { profiled <- e.profile(path, *benchSeconds-2) }()
		*benchProfile = ""
	} else {
		profiled <- nil
	}
	before, podsBefore, machineBefore := cpuOf(tg.pid), selfCPU(), machineCPU()
	out, err := e.ns.Try("wrk", "-t2", "-c"+conns, fmt.Sprintf("-d%ds", *benchSeconds), "--latency",
		"-H", "Host: bench.example", tg.url())
	used, podsUsed, machineUsed := cpuOf(tg.pid)-before, selfCPU()-podsBefore, machineCPU()-machineBefore
	if perr := <-profiled; perr != nil {
		b.Errorf("profile: %v", perr)
	}
	if err != nil {
		b.Fatalf("wrk: %v\n%s", err, out)
	}
	r, err := parseWrk(out)
	if err != nil {
		b.Fatal(err)
	}
	if r.requestsTotal > 0 {
		r.cpuPer1000 = used * 1000 / time.Duration(r.requestsTotal)
		r.podsPer1000 = podsUsed * 1000 / time.Duration(r.requestsTotal)
		r.machinePer1000 = machineUsed * 1000 / time.Duration(r.requestsTotal)
	}
	return r
}

// selfCPU is the CPU time this process has used: the pods' servers,
// which run in it.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineCPU is the CPU time the machine's cores have been busy, from
// /proc/stat (all but idle and iowait).
func machineCPU() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	ticks := 0
	for i, f := range strings.Fields(line)[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.Atoi(f)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// row is the result as a line of the benchmark's table.
func (r wrkResult) row(name, conns string) string {
	return fmt.Sprintf("| %-6s | %4s | %8.0f | %7s | %7s | %6s | %d non-2xx, %s |", name, conns, r.rps,
		r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.cpuPer1000.Round(time.Millisecond/10), r.non2xx, orNone(r.socketErrors))
}

func orNone(s string) string {
	if s == "" {
		return "no socket errors"
	}
	return "socket errors: " + s
}

// profile saves a CPU profile of the ingress taken over seconds.
func (e *env) profile(path string, seconds int) error {
	resp, err := e.ns.HTTPClient(time.Duration(seconds+10) * time.Second).Get(fmt.Sprintf("http://%s:10254/debug/pprof/profile?seconds=%d", ingressIP, seconds))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}
