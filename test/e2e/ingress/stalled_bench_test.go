package ingress_test

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

var benchStalled = flag.Int("ingress.stalled", 1000, "clients that stop reading their answers, present during the measured runs of BenchmarkIngressStalledClients")

// stalledBody is the size of the answer a stalled client asks for: more
// than what the sockets between it and the proxy take in (dialStalled
// keeps that near 100 KiB), so that the proxy holds the rest for it.
const stalledBody = 256 << 10

// bigPod answers every request with stalledBody bytes, counting the
// requests it got.
func (e *env) bigPod(requests *atomic.Int64) string {
	ip := e.podIP()
	l := e.ns.Listen("tcp", fmt.Sprintf("%s:%d", ip, podPort))
	body := make([]byte, stalledBody)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		_, _ = w.Write(body)
	})}
	go srv.Serve(l)
	e.t.Cleanup(func() { srv.Close() })
	return ip
}

// stalledNginx is nginx's server for stalled.example, in front of the
// big pod.
func stalledNginx(pod string) string {
	return fmt.Sprintf(`  upstream big {
    server %s:%d;
    keepalive 256;
  }
  server {
    listen %s:80;
    server_name stalled.example;
    location / {
      proxy_pass http://big;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
    }
  }
`, pod, podPort, nginxIP)
}

// dialStalled opens n connections from the namespace to ip, each asking
// stalled.example for its big answer and then reading nothing. Each has
// a receive buffer of 4 KiB and a segment size of 1,400 bytes: over
// loopback's 64 KiB segments the kernel would take in megabytes of each
// answer (gigabytes for a thousand clients) before the proxy's writes
// wait.
func (e *env) dialStalled(ip string, n int) []net.Conn {
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		_ = rc.Control(func(fd uintptr) {
			if err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10); err == nil {
				err = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 1400)
			}
		})
		return err
	}}
	conns := make([]net.Conn, 0, n)
	err := e.ns.Do(func() error {
		for range n {
			c, err := d.Dial("tcp", ip+":80")
			if err != nil {
				return err
			}
			conns = append(conns, c)
			if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: stalled.example\r\n\r\n"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		closeAll(conns)
		e.t.Fatalf("stalled clients: %v", err)
	}
	return conns
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// BenchmarkIngressStalledClients measures what clients that stop reading
// their answers cost the others: wrk's rate and p99 at 50 connections to
// each proxy without them, and with -ingress.stalled of them present
// (each asked for an answer larger than the sockets take in, and reads
// nothing), in rounds that alternate the order, so that the two runs of
// a ratio are seconds apart. nginx, measured the same way, is the
// reference. Run it with
//
//	make bench-deps
//	go test ./test/e2e/ingress -run - -bench IngressStalledClients -benchtime 1x -v
func BenchmarkIngressStalledClients(b *testing.B) {
	for _, tool := range []string{"wrk", *benchNginx} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Fatalf("%s is not installed: make bench-deps installs wrk and nginx-light", tool)
		}
	}
	e := newEnv(b, append([]string{"--access-log", "off"}, strings.Fields(*benchArgs)...)...)
	var pods []string
	for i := range 4 {
		pods = append(pods, e.plainPod(fmt.Sprintf("bench-%d", i+1)))
	}
	e.service("default", "bench", pods...)
	e.hostIngress("bench", "bench.example", "bench")
	var requests atomic.Int64
	big := e.bigPod(&requests)
	e.service("default", "big", big)
	e.hostIngress("stalled", "stalled.example", "big")
	ng := e.startNginx(pods, stalledNginx(big))
	for _, ip := range []string{ingressIP, nginxIP} {
		for _, host := range []string{"bench.example", "stalled.example"} {
			e.eventually(host+" on "+ip, func() error {
				return e.getOK(e.ns.HTTPClient(5*time.Second), "http://"+ip+"/", host)
			})
		}
	}
	targets := []benchTarget{{name: "svcnet", ip: ingressIP, pid: e.ingress.PID()}, {name: "nginx", ip: nginxIP, pid: ng.proc.PID()}}

	// run measures tg with n stalled clients present (none for 0).
	run := func(tg benchTarget, n int) wrkResult {
		if n > 0 {
			before := requests.Load()
			conns := e.dialStalled(tg.ip, n)
			defer func() {
				closeAll(conns)
				time.Sleep(time.Second) // the proxy drops them before the next run
			}()
			e.eventually("the stalled clients' requests at the pod", func() error {
				if got := requests.Load() - before; got < int64(n) {
					return fmt.Errorf("%d of %d", got, n)
				}
				return nil
			})
			time.Sleep(500 * time.Millisecond) // the proxy writes what it can, then waits
		}
		return e.wrkRun(b, tg, "50")
	}
	b.ResetTimer()
	rates := map[string][]float64{}
	p99s := map[string][]float64{}
	var table []string
	for round := range *benchRounds {
		order := targets
		if round%2 == 1 {
			order = []benchTarget{targets[1], targets[0]}
		}
		for _, tg := range order {
			var without, with wrkResult
			if round%2 == 0 {
				without, with = run(tg, 0), run(tg, *benchStalled)
			} else {
				with, without = run(tg, *benchStalled), run(tg, 0)
			}
			rates[tg.name] = append(rates[tg.name], with.rps/without.rps)
			p99s[tg.name] = append(p99s[tg.name], float64(with.p99)/float64(without.p99))
			table = append(table, without.row(tg.name, "50"), with.row(fmt.Sprintf("%s+%d", tg.name, *benchStalled), "50"))
			b.Logf("round %d: %s\n%s", round+1, without.row(tg.name, "50"), with.row(fmt.Sprintf("%s+%d", tg.name, *benchStalled), "50"))
		}
	}
	for _, tg := range targets {
		rate, p99 := framework.Median(rates[tg.name]), framework.Median(p99s[tg.name])
		b.ReportMetric(rate, tg.name+"-stalled-rate-ratio")
		b.ReportMetric(p99, tg.name+"-stalled-p99-ratio")
		b.Logf("%s with %d stalled clients over without, per round: rate %s (median %.3f), p99 %s (median %.3f)",
			tg.name, *benchStalled, ratios(rates[tg.name]), rate, ratios(p99s[tg.name]), p99)
	}
	b.Logf("\n| proxy | connections | requests/s | p50 | p99 | CPU per 1,000 requests | errors |\n|---|---|---|---|---|---|---|\n%s", strings.Join(table, "\n"))
}
