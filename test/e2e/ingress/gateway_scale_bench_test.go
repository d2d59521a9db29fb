package ingress_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

var (
	benchRoutes  = flag.Int("ingress.routes", 1000, "HTTPRoutes (each with a Service of 10 endpoints) of Benchmark1000HTTPRoutes")
	benchChanges = flag.Int("ingress.changes", 50, "route changes Benchmark1000HTTPRoutes times (at most 200)")
)

// Benchmark1000HTTPRoutes: -ingress.routes HTTPRoutes (1,000) on one
// Gateway listener, each a host of its own in front of a Service of 10
// endpoints, as Benchmark1000Ingresses has Ingresses. It measures,
// -ingress.changes times (50), the time from just before the API write
// of a route's change — a new rule, a path prefix of its own to a
// backend of its own (a Service of one pod) — to the first request
// answered by that rule (target: p99 under 50 ms), and the ingress's
// resident memory with the routes. Run it with
//
//	go test ./test/e2e/ingress -run - -bench 1000HTTPRoutes -benchtime 1x
func Benchmark1000HTTPRoutes(b *testing.B) {
	const endpoints = 10
	n, changes := *benchRoutes, *benchChanges
	if n < 1 || changes < 1 || changes > 200 {
		// Each change has a pod of its own, on the namespace's /24.
		b.Fatalf("-ingress.routes %d, -ingress.changes %d: at least one route, 1 to 200 changes", n, changes)
	}
	e := newGatewayEnv(b, "--access-log", "off")
	var base []string
	for i := range endpoints {
		base = append(base, e.plainPod(fmt.Sprintf("base-%d", i)))
	}
	// The new rules' backends, there before the timer starts: what is
	// timed is the route's change, not a new Service's.
	for i := range changes {
		e.service("default", fmt.Sprintf("fresh-%d", i), e.plainPod(fmt.Sprintf("fresh-%d", i)))
	}
	port := e.gateway("web")
	ctx := context.Background()
	routes := e.gw.GatewayV1().HTTPRoutes("default")
	start := time.Now()
	for i := range n {
		name := fmt.Sprintf("svc-%04d", i)
		e.service("default", name, base...)
		e.createRoute(hostRoute("web", name, name+".example", name))
	}
	gwURL := fmt.Sprintf("http://%s:%d", ingressIP, port)
	last := fmt.Sprintf("svc-%04d", n-1)
	e.eventually("the last HTTPRoute served", func() error {
		return e.getOK(e.ns.HTTPClient(time.Second), gwURL+"/", last+".example")
	})
	served := time.Since(start)
	// The ingress writes each route's status, one write each (within
	// --kube-api-qps; a write that conflicts is redone from the change's
	// event): that burst of writes,
	// and the rebuilds their events cause, is over before the changes.
	for {
		list, err := routes.List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		done := 0
		for _, r := range list.Items {
			if len(r.Status.Parents) > 0 {
				done++
			}
		}
		if done == n {
			break
		}
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("%d of %d HTTPRoutes have a status after 5 minutes\ningress log:\n%s", done, n, e.ingress.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Logf("%d HTTPRoutes, Services and EndpointSlices created and served in %s, their statuses written in %s; the Gateway's proxy port %d, Programmed %s (no load balancer here: served all the same)",
		n, served.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), port, e.gatewayProgrammed("web"))

	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: e.ns.DialContext, MaxIdleConnsPerHost: 4}}
	b.ResetTimer()
	var times []time.Duration
	for i := range changes {
		name := fmt.Sprintf("svc-%04d", (i*37)%n)
		r, err := routes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		// Until the change is in, the route's "/" rule answers this path
		// (from a base pod).
		path, want := fmt.Sprintf("/fresh-%d", i), fmt.Sprintf("fresh-%d", i)
		r.Spec.Rules = append(r.Spec.Rules, prefixRule(path, want))
		t0 := time.Now()
		if _, err := routes.Update(ctx, r, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		times = append(times, pollUntil(b, client, t0, gwURL+path, name+".example", func(_ int, body string) bool { return body == want }))
	}
	b.StopTimer()
	rss := rssOf(e.ingress.PID())
	b.Logf("from the API write to the first request answered by the new rule, %d changes: p50 %s p99 %s max %s (target p99 < 50 ms); ingress RSS %d MiB with %d HTTPRoutes",
		changes, framework.Percentile(times, 50).Round(time.Millisecond/10), framework.Percentile(times, 99).Round(time.Millisecond/10),
		framework.Percentile(times, 100).Round(time.Millisecond/10), rss>>20, n)
	framework.ReportLatencies(b, "route", times)
	b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
}

// pollUntil sends GET url with the Host header host until its answer
// satisfies ok, every 0.2 ms, and returns how long that took from t0; it
// fails b after 10 s.
func pollUntil(b *testing.B, client *http.Client, t0 time.Time, url, host string, ok func(code int, body string) bool) time.Duration {
	for time.Since(t0) < 10*time.Second {
		req, _ := http.NewRequest("GET", url, nil)
		req.Host = host
		if resp, err := client.Do(req); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if ok(resp.StatusCode, string(body)) {
				return time.Since(t0)
			}
		}
		time.Sleep(200 * time.Microsecond)
	}
	b.Fatalf("%s (Host %s): no change in 10 s", url, host)
	return 0
}
