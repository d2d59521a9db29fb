package ingress_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/loadgen"
)

// churnPod is a pod that can be stopped and started again on its address,
// as a Deployment's scaling does: stopping is what a pod that exits at
// once on SIGTERM does (new connections refused, idle keep-alive
// connections closed, requests in flight finished).
type churnPod struct {
	e    *env
	name string
	ip   string
	mu   sync.Mutex
	srv  *http.Server
}

func (e *env) churnPod(name string) *churnPod {
	ip := e.podIP()
	p := &churnPod{e: e, name: name, ip: ip}
	e.t.Cleanup(p.stop)
	return p
}

// churnPods starts n churn pods, churn-1 to churn-n.
func (e *env) churnPods(n int) []*churnPod {
	pods := make([]*churnPod, n)
	for i := range pods {
		pods[i] = e.churnPod(fmt.Sprintf("churn-%d", i+1))
		pods[i].start()
	}
	return pods
}

func (p *churnPod) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.e.ns.Listen("tcp", fmt.Sprintf("%s:%d", p.ip, podPort))
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, p.name) })}
	go p.srv.Serve(l)
}

func (p *churnPod) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.srv.Shutdown(ctx)
		p.srv = nil
	}
}

// setSlice writes the Service's EndpointSlice: ready pods, and pods that
// are terminating (not ready, still serving).
func (e *env) setSlice(ns, name string, ready, terminating []*churnPod) {
	e.t.Helper()
	e.writeSlice(podSlice(ns, name, ipsOf(ready), ipsOf(terminating)))
}

// ipsOf is the pods' addresses.
func ipsOf(pods []*churnPod) []string {
	var ips []string
	for _, p := range pods {
		ips = append(ips, p.ip)
	}
	return ips
}

// TestChurn holds a steady load through the ingress while the backend
// scales 5↔7 every two seconds (the pods scaled away exit at once, as
// their endpoints turn terminating) and an Ingress path is added and
// removed: not one request may fail.
func TestChurn(t *testing.T) {
	e := newEnv(t, "--access-log", "off")
	pods := e.churnPods(7)
	e.service("default", "churn", ipsOf(pods[:5])...)
	for _, p := range pods[5:] {
		p.stop()
	}
	const ingress = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: churn}
spec:
  rules:
  - host: churn.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: churn, port: {name: http}}}}
`
	const extra = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: churn-extra}
spec:
  rules:
  - host: churn.example
    http:
      paths:
      - {path: /extra, pathType: Prefix, backend: {service: {name: churn, port: {number: 80}}}}
`
	e.kubectl.MustRun(ingress, "apply", "-f", "-")
	e.expect("churn.example", "/", 200, "") // the pods answer plain text: no JSON pod name

	// 100 requests/s for 16 s: steady, and light enough not to starve the
	// clusters of the tests that run beside it on two cores.
	ctx, cancel := context.WithTimeout(context.Background(), 16*time.Second)
	defer cancel()
	results := make(chan loadgen.Result, 1)
	go func() {
		results <- loadgen.Run(ctx, loadgen.Target{Name: "ingress", URL: "http://" + ingressIP + "/", Host: "churn.example",
			Rate: 100, Dial: e.ns.DialContext})[0]
	}()
	time.Sleep(time.Second)
	up := false
	for round := 0; ctx.Err() == nil && round < 6; round++ {
		if up {
			// 7 → 5: the last two turn terminating and exit at once, then
			// leave the slice.
			e.setSlice("default", "churn", pods[:5], pods[5:])
			pods[5].stop()
			pods[6].stop()
			time.Sleep(500 * time.Millisecond)
			e.setSlice("default", "churn", pods[:5], nil)
			e.kubectl.MustRun("", "delete", "ingress", "churn-extra")
		} else {
			// 5 → 7: new pods start, then become ready.
			pods[5].start()
			pods[6].start()
			e.setSlice("default", "churn", pods, nil)
			e.kubectl.MustRun(extra, "apply", "-f", "-")
		}
		up = !up
		time.Sleep(2 * time.Second)
	}
	cancel()
	r := <-results
	t.Logf("%s", r)
	if r.Sent < 1000 {
		t.Fatalf("only %d requests sent", r.Sent)
	}
	if r.Failed() > 0 {
		t.Errorf("%d of %d requests failed: %s", r.Failed(), r.Sent, r)
	}
	for name, n := range r.Answers {
		if !strings.HasPrefix(name, "churn-") {
			t.Errorf("%d answers %q", n, name)
		}
	}
	if len(r.Answers) != 7 {
		t.Errorf("answers from %d pods, want all 7: %v", len(r.Answers), r.Answers)
	}
}
