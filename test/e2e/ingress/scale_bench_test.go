package ingress_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Benchmark1000Ingresses: 1,000 Ingresses, each a host of its own in
// front of a Service of 10 endpoints. It measures, 50 times each, the
// time from the API write to the first request through the ingress that
// sees the change — an endpoint change (a Service's endpoints replaced by
// a new pod) and an Ingress change (a new path) — and the ingress's
// memory. Run it with
//
//	go test ./test/e2e/ingress -run - -bench 1000Ingresses -benchtime 1x
func Benchmark1000Ingresses(b *testing.B) {
	const n, endpoints, changes = 1000, 10, 50
	e := newEnv(b, "--access-log", "off")
	var base []string
	for i := range endpoints {
		base = append(base, e.plainPod(fmt.Sprintf("base-%d", i)))
	}
	fresh := make([]string, changes)
	for i := range fresh {
		fresh[i] = e.plainPod(fmt.Sprintf("fresh-%d", i))
	}
	ctx := context.Background()
	start := time.Now()
	prefix := ptr.To(networkingv1.PathTypePrefix)
	for i := range n {
		name := fmt.Sprintf("svc-%04d", i)
		e.service("default", name, base...)
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{Host: name + ".example", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: prefix, Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Name: "http"}}}}}}}}}}}
		if _, err := e.client.NetworkingV1().Ingresses("default").Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	last := fmt.Sprintf("svc-%04d", n-1)
	e.eventually("the last Ingress served", func() error {
		if code, _ := e.get(last+".example", "/"); code != 200 {
			return fmt.Errorf("status %d", code)
		}
		return nil
	})
	b.Logf("%d Ingresses, Services and EndpointSlices created and served in %s", n, time.Since(start).Round(time.Millisecond))

	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: e.ns.DialContext, MaxIdleConnsPerHost: 4}}
	until := func(t0 time.Time, host, path string, ok func(code int, body string) bool) time.Duration {
		return pollUntil(b, client, t0, "http://"+ingressIP+path, host, ok)
	}
	b.ResetTimer()
	var endpointTimes, ingressTimes []time.Duration
	for i := range changes {
		name := fmt.Sprintf("svc-%04d", (i*37)%n)
		slice, err := e.client.DiscoveryV1().EndpointSlices("default").Get(ctx, name+"-1", metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		next := podSlice("default", name, []string{fresh[i]}, nil)
		next.ResourceVersion = slice.ResourceVersion
		want := fmt.Sprintf("fresh-%d", i)
		t0 := time.Now()
		if _, err := e.client.DiscoveryV1().EndpointSlices("default").Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		endpointTimes = append(endpointTimes, until(t0, name+".example", "/", func(code int, body string) bool { return body == want }))

		ing, err := e.client.NetworkingV1().Ingresses("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		// A new host that only the new rule serves: 404 until the change
		// is in.
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: fmt.Sprintf("new-%d.example", i),
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: prefix, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}})
		t0 = time.Now()
		if _, err := e.client.NetworkingV1().Ingresses("default").Update(ctx, ing, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		ingressTimes = append(ingressTimes, until(t0, fmt.Sprintf("new-%d.example", i), "/", func(code int, _ string) bool { return code == 200 }))
	}
	b.StopTimer()
	pct := func(d []time.Duration, p int) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[min(len(s)-1, len(s)*p/100)]
	}
	rss := rssOf(e.ingress.PID())
	b.ReportMetric(float64(pct(endpointTimes, 50).Microseconds())/1000, "endpoint-p50-ms")
	b.ReportMetric(float64(pct(endpointTimes, 99).Microseconds())/1000, "endpoint-p99-ms")
	b.ReportMetric(float64(pct(ingressTimes, 50).Microseconds())/1000, "ingress-p50-ms")
	b.ReportMetric(float64(pct(ingressTimes, 99).Microseconds())/1000, "ingress-p99-ms")
	b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
	b.Logf("from the API write to the first request that sees it, %d changes each: endpoints p50 %s p99 %s max %s; Ingress p50 %s p99 %s max %s; ingress RSS %d MiB",
		changes, pct(endpointTimes, 50).Round(time.Millisecond/10), pct(endpointTimes, 99).Round(time.Millisecond/10), pct(endpointTimes, 100).Round(time.Millisecond/10),
		pct(ingressTimes, 50).Round(time.Millisecond/10), pct(ingressTimes, 99).Round(time.Millisecond/10), pct(ingressTimes, 100).Round(time.Millisecond/10), rss>>20)
}

// rssOf is a process's resident memory in bytes.
func rssOf(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
