package ingress_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// BenchmarkHTTPRouteVsIngress measures one svcnet ingress serving the
// same requests two ways, in front of the same four pods as
// BenchmarkIngressVsNginx: through an Ingress (port 80) and through an
// HTTPRoute on a Gateway's HTTP listener (the Gateway's proxy port), both
// routing every path of bench.example to the Service bench. wrk from the
// namespace at each -ingress.connections, in -ingress.rounds rounds that
// alternate which goes first; it reports each one's requests/s and p99
// (its median round) and the medians of the rounds' route/ingress ratios
// as pairs-c<connections>-rate-ratio and -p99-ratio (issue 37's target:
// a rate ratio of at least 0.95). Run it with
//
//	make bench-deps   # wrk
//	go test ./test/e2e/ingress -run - -bench HTTPRouteVsIngress -benchtime 1x -v -ingress.rounds 8
func BenchmarkHTTPRouteVsIngress(b *testing.B) {
	if _, err := exec.LookPath("wrk"); err != nil {
		b.Fatal("wrk is not installed: make bench-deps installs it")
	}
	e := newGatewayEnv(b, append([]string{"--access-log", "off"}, strings.Fields(*benchArgs)...)...)
	var pods []string
	for i := range 4 {
		pods = append(pods, e.plainPod(fmt.Sprintf("bench-%d", i+1)))
	}
	e.service("default", "bench", pods...)
	e.hostIngress("bench", "bench.example", "bench")
	port := e.gateway("bench")
	e.createRoute(hostRoute("bench", "bench", "bench.example", "bench"))
	targets := [2]benchTarget{
		{name: "route", ip: ingressIP, pid: e.ingress.PID(), port: port},
		{name: "ingress", ip: ingressIP, pid: e.ingress.PID()},
	}
	for _, tg := range targets {
		e.eventually("bench.example through the "+tg.name, func() error {
			return e.getOK(e.ns.HTTPClient(time.Second), tg.url(), "bench.example")
		})
	}
	b.Logf("the Gateway's proxy port is %d; Programmed %s (no load balancer here: served all the same)", port, e.gatewayProgrammed("bench"))
	b.ResetTimer()
	e.pairedRounds(b, targets)
}
