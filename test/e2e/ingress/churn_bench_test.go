package ingress_test

import (
	"context"
	"flag"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

var churnSeconds = flag.Int("ingress.churn-seconds", 60, "length of each churn run, in seconds")

// BenchmarkIngressChurn holds wrk's load (50 connections) on svcnet ingress
// and then on nginx for -ingress.churn-seconds each while the backend
// scales 5↔7 every 2 s (the pods scaled away exit at once). svcnet
// ingress follows the EndpointSlice; nginx gets its upstream rewritten
// and a reload on each change, as nginx-based controllers do. It reports
// the errors of each by kind. Run it with
//
//	make bench-deps
//	go test ./test/e2e/ingress -run - -bench IngressChurn -benchtime 1x
func BenchmarkIngressChurn(b *testing.B) {
	for _, tool := range []string{"wrk", *benchNginx} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Fatalf("%s is not installed: make bench-deps installs wrk and nginx-light", tool)
		}
	}
	e := newEnv(b, "--access-log", "off")
	pods := e.churnPods(7)
	e.service("default", "bench", ipsOf(pods[:5])...)
	e.hostIngress("bench", "bench.example", "bench")
	pods[5].stop()
	pods[6].stop()
	ng := e.startNginx(ipsOf(pods[:5]))
	for _, ip := range []string{ingressIP, nginxIP} {
		e.eventually("the route on "+ip, func() error {
			out, err := e.ns.Try("wrk", "-t1", "-c1", "-d1s", "-H", "Host: bench.example", "http://"+ip+"/")
			if r, perr := parseWrk(out); err != nil || perr != nil || r.non2xx > 0 || r.requestsTotal == 0 {
				return fmt.Errorf("%v %v %s", err, perr, out)
			}
			return nil
		})
	}

	// The two ways to follow a change, each as its controller does.
	type way struct {
		name, ip string
		scale    func(ready, terminating []*churnPod)
	}
	ways := []way{
		{"svcnet", ingressIP, func(ready, terminating []*churnPod) { e.setSlice("default", "bench", ready, terminating) }},
		{"nginx", nginxIP, func(ready, _ []*churnPod) { ng.write(ipsOf(ready)); ng.reload() }},
	}
	b.ResetTimer()
	var table []string
	for _, w := range ways {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*churnSeconds)*time.Second)
		done := make(chan string, 1)
		go func() {
			out, _ := e.ns.Try("wrk", "-t2", "-c50", fmt.Sprintf("-d%ds", *churnSeconds), "--latency", "-H", "Host: bench.example", "http://"+w.ip+"/")
			done <- out
		}()
		changes := 0
		for up := false; ctx.Err() == nil; up = !up {
			time.Sleep(2 * time.Second)
			if ctx.Err() != nil {
				break
			}
			if up {
				// 7 → 5: two pods leave (terminating), exit at once, are
				// removed.
				w.scale(pods[:5], pods[5:])
				pods[5].stop()
				pods[6].stop()
				time.Sleep(500 * time.Millisecond)
				w.scale(pods[:5], nil)
			} else {
				pods[5].start()
				pods[6].start()
				w.scale(pods, nil)
			}
			changes++
		}
		cancel()
		out := <-done
		r, err := parseWrk(out)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(r.non2xx), w.name+"-non2xx")
		table = append(table, fmt.Sprintf("| %s | %d | %.0f | %s | %d | %s |", w.name, changes, r.rps, r.p99.Round(10*time.Microsecond), r.non2xx, orNone(r.socketErrors)))
		// Back to 5 pods for the next.
		if pods[5].srv != nil {
			w.scale(pods[:5], pods[5:])
			pods[5].stop()
			pods[6].stop()
			w.scale(pods[:5], nil)
		}
	}
	b.Logf("\n| proxy | backend changes | requests/s | p99 | non-2xx answers | socket errors |\n|---|---|---|---|---|---|\n%s", strings.Join(table, "\n"))
}
