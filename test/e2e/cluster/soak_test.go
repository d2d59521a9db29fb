package cluster_test

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/loadgen"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// soakDurationEnv turns the soak on and says how long it runs: `make
// soak` sets it to an hour; shorter runs (6m) are for developing it.
const soakDurationEnv = "SVCNET_SOAK_DURATION"

// soakOutEnv names the directory of the report and its plots (default:
// the repository's docs/soak, which docs/reliability.md shows).
const soakOutEnv = "SVCNET_SOAK_OUT"

// soakRate is each path's requests (lookups) per second: steady, and low
// enough that six paths leave the two cores to the cluster.
const soakRate = 10

// soakGrowthLimit is the most a component's RSS or open files may grow
// between the second and the last sixth of the run (ten minutes each of
// an hour), in percent.
const soakGrowthLimit = 10.0

// soakPlan is when a soak of a given duration does what. An hour's soak
// rolls out every minute, strikes a fault every five and samples every
// minute; shorter runs scale down so that a 6-minute run still does
// every kind of fault once.
type soakPlan struct {
	Duration     time.Duration
	RolloutEvery time.Duration
	FaultEvery   time.Duration
	SampleEvery  time.Duration
	// Window is the length of the two periods whose usage is compared:
	// the second sixth of the run (the first is warm-up) and the last.
	Window time.Duration
	// One create or delete every ChurnEvery; each object lives ChurnLife.
	ChurnEvery, ChurnLife time.Duration
}

func newSoakPlan(d time.Duration) soakPlan {
	return soakPlan{
		Duration:     d,
		RolloutEvery: min(time.Minute, d/6),
		FaultEvery:   min(5*time.Minute, max(d/12, min(time.Minute, d/6))),
		SampleEvery:  min(time.Minute, max(d/60, 10*time.Second)),
		Window:       d / 6,
		ChurnEvery:   3 * time.Second,
		ChurnLife:    15 * time.Second,
	}
}

// faultSlots are the times (from the start) of the component faults,
// one in the middle of each FaultEvery, and of the etcd member's kill:
// once, between the two slots nearest the middle of the run.
func (p soakPlan) faultSlots() (slots []time.Duration, etcdAt time.Duration) {
	n := int(p.Duration / p.FaultEvery)
	for i := range n {
		slots = append(slots, p.FaultEvery*time.Duration(2*i+1)/2)
	}
	return slots, p.FaultEvery * time.Duration(max(n/2, 1))
}

// TestSplitLost: a failed request is lost with a killed server only if
// it was in flight at the kill or sent after it, sent before the process
// ended, and its connection was made then broken.
func TestSplitLost(t *testing.T) {
	kill := time.Date(2026, 12, 7, 8, 26, 21, 869e6, time.UTC)
	faults := []faultRecord{{Name: "API server", At: kill.Add(-time.Minute)}, {Name: "ingress replica", At: kill, Ended: kill.Add(150 * time.Millisecond)}}
	at := func(ms int) time.Time { return kill.Add(time.Duration(ms) * time.Millisecond) }
	cases := []struct {
		name string
		o    loadgen.Outcome
		lost bool
	}{
		{"reset, sent after the kill, before the end", loadgen.Outcome{At: at(100), Took: 30 * time.Millisecond, Kind: "reset", Connected: at(101)}, true},
		{"closed, in flight at the kill", loadgen.Outcome{At: at(-20), Took: 60 * time.Millisecond, Kind: "closed", Connected: at(-19)}, true},
		{"reset, over before the kill", loadgen.Outcome{At: at(-90), Took: 20 * time.Millisecond, Kind: "reset", Connected: at(-89)}, false},
		{"reset, sent after the end", loadgen.Outcome{At: at(200), Took: 10 * time.Millisecond, Kind: "reset", Connected: at(201)}, false},
		{"refused, no connection", loadgen.Outcome{At: at(100), Took: time.Millisecond, Kind: "refused"}, false},
		{"timeout after the connection", loadgen.Outcome{At: at(100), Took: 10 * time.Second, Kind: "timeout", Connected: at(101)}, false},
		{"answered", loadgen.Outcome{At: at(100), Took: 3 * time.Millisecond, Connected: at(101)}, false},
	}
	for _, tc := range cases {
		kept, lost := splitLost([]loadgen.Outcome{tc.o}, faults)
		if (len(lost) == 1) != tc.lost || len(kept)+len(lost) != 1 {
			t.Errorf("%s: kept %v, lost %v; want lost %v", tc.name, kept, lost, tc.lost)
		}
	}
}

func TestSoakPlan(t *testing.T) {
	for _, tc := range []struct {
		d                              time.Duration
		rollout, fault, sample, window time.Duration
		faults                         int
		firstFault, lastFault, etcdAt  time.Duration
	}{
		{time.Hour, time.Minute, 5 * time.Minute, time.Minute, 10 * time.Minute, 12, 150 * time.Second, 3450 * time.Second, 30 * time.Minute},
		{6 * time.Minute, time.Minute, time.Minute, 10 * time.Second, time.Minute, 6, 30 * time.Second, 330 * time.Second, 3 * time.Minute},
		{30 * time.Minute, time.Minute, 150 * time.Second, 30 * time.Second, 5 * time.Minute, 12, 75 * time.Second, 1725 * time.Second, 15 * time.Minute},
		{2 * time.Minute, 20 * time.Second, 20 * time.Second, 10 * time.Second, 20 * time.Second, 6, 10 * time.Second, 110 * time.Second, time.Minute},
	} {
		p := newSoakPlan(tc.d)
		slots, etcdAt := p.faultSlots()
		if p.RolloutEvery != tc.rollout || p.FaultEvery != tc.fault || p.SampleEvery != tc.sample || p.Window != tc.window ||
			len(slots) != tc.faults || slots[0] != tc.firstFault || slots[len(slots)-1] != tc.lastFault || etcdAt != tc.etcdAt {
			t.Errorf("%v: plan %+v, slots %v, etcd at %v; want rollouts every %v, faults every %v (%d, %v … %v), samples every %v, window %v, etcd at %v",
				tc.d, p, slots, etcdAt, tc.rollout, tc.fault, tc.faults, tc.firstFault, tc.lastFault, tc.sample, tc.window, tc.etcdAt)
		}
	}
}

// TestSoak runs a 3-node cluster with three control planes for
// SVCNET_SOAK_DURATION (`make soak`: an hour) under steady traffic
// through every path a Service offers — ClusterIP, NodePort,
// LoadBalancer, Ingress, DNS through the cluster DNS's ClusterIP and
// through the node-local cache — while the reference Deployment is rolled
// out every minute, Services, Ingresses and pods are created and deleted
// all along, one component after the other is killed or replaced (API
// server, controller manager, a proxy, a DNS replica, a node agent, an
// ingress replica; an etcd member once), and every component's memory,
// open files and goroutines and every node's conntrack table are
// sampled. No request may fail on any path, every fault must be
// recovered from, and no component's RSS or open files may grow more
// than 10 % between the second and the last sixth of the run. The report
// and its plots (docs/soak, shown in docs/reliability.md) are written
// whatever the outcome.
func TestSoak(t *testing.T) {
	env := os.Getenv(soakDurationEnv)
	if env == "" {
		t.Skip("the soak runs alone, for an hour: make soak (or " + soakDurationEnv + "=6m for a short run)")
	}
	d, err := time.ParseDuration(env)
	if err != nil || d < 2*time.Minute {
		t.Fatalf("%s=%q: want a duration of at least 2m", soakDurationEnv, env)
	}
	// The soak ends its own waits (3 minutes at most for a fault, a
	// rollout, the churn's cleanup); the test binary's -timeout must
	// leave room for them and for bringing the cluster up and down.
	if deadline, ok := t.Deadline(); ok && time.Until(deadline) < d+20*time.Minute {
		t.Fatalf("-timeout leaves %v: a %v soak needs at least 20 minutes more", time.Until(deadline).Round(time.Minute), d)
	}
	out := os.Getenv(soakOutEnv)
	if out == "" {
		out, _ = filepath.Abs(filepath.Join("..", "..", "..", "docs", "soak"))
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	// Events live an hour by default, so in an hour's run none would
	// expire and the API servers' and etcd's data would grow to the end
	// by design; kept five minutes, they reach a steady state well
	// before the compared windows, and what grows then is a leak.
	s := &soak{t: t, plan: newSoakPlan(d), c: upWithIngress(t, 3, "--control-planes", "3", "--apiserver-arg=--event-ttl=5m")}
	s.setUp()
	s.run()
	s.writeReport(out)
	s.check()
}

// soak is one soak run: the cluster, the load, and what was recorded.
type soak struct {
	t      *testing.T
	c      *localCluster
	plan   soakPlan
	rc     *rest.Config
	client kubernetes.Interface
	start  time.Time
	end    time.Time
	// The machine's load average (1, 5, 15 minutes) at the start and the
	// end: the run's context on a shared machine.
	loadStart, loadEnd string

	targets []loadgen.Target
	paths   []soakPath

	mu        sync.Mutex
	faults    []faultRecord
	rollouts  []rolloutRecord
	churnOps  []churnOp
	samples   []procSample
	conntrack []conntrackSample
	leftover  []string // churn objects still there at the end
}

// soakPath is one path's requests, in the report's order.
type soakPath struct {
	name     string
	outcomes []loadgen.Outcome
	stalls   []loadgen.Stall
	// lost are the requests in flight to a server process a fault
	// killed, lost with it (splitLost), not among outcomes.
	lost []loadgen.Outcome
}

// splitLost takes from outcomes the failed requests that were lost with
// a server process a fault killed (loadgen.SplitLost).
func splitLost(outcomes []loadgen.Outcome, faults []faultRecord) (kept, lost []loadgen.Outcome) {
	kills := make([]loadgen.Kill, len(faults))
	for i, f := range faults {
		kills[i] = loadgen.Kill{At: f.At, Ended: f.Ended}
	}
	kept, byKill := loadgen.SplitLost(outcomes, kills)
	for _, l := range byKill {
		lost = append(lost, l...)
	}
	return kept, lost
}

type faultRecord struct {
	Name, How string
	At        time.Time
	Took      time.Duration // until recovered
	Recovered bool
	To        time.Time // the end of its window: recovery and 3 s
	Problem   string    // what went wrong doing it or after it
	// Ended is when the server process a kill struck ended (its exit as
	// the node agent logged it); zero for other faults.
	Ended time.Time
}

type rolloutRecord struct {
	At       time.Time
	Took     time.Duration
	Complete bool
	Problem  string
}

type churnOp struct {
	At       time.Time
	Took     time.Duration // until it answered or failed
	Kind, Op string        // "Service", "create"
	Name     string
	Result   string // "" for success, else the kind of failure
}

// procSample is one component's usage at one sample.
type procSample struct {
	At         time.Time
	Key        string // the component: "cp-1 apiserver", "node-2 proxy", "dns@node-1-3fa2…"
	PID        int
	RSS        float64 // bytes
	FDs        float64
	Goroutines float64 // NaN where the component serves no go_goroutines
	// Leading: a controller manager that held the lease. The leader runs
	// every controller and its informers; a standby, nothing: a
	// standby's taking over is no leak.
	Leading bool
}

type conntrackSample struct {
	At      time.Time
	Where   string
	Entries float64
}

func (s *soak) ns(name string) string { return "svcnet-" + s.c.name + "-" + name }

var soakNodes = []string{"node-1", "node-2", "node-3"}
var soakCPs = []string{"cp-1", "cp-2", "cp-3"}

func cpIP(i int) string { return fmt.Sprintf("172.18.1.%d", 11+i) }

// setUp applies the reference Deployment behind a NodePort, a
// LoadBalancer and an Ingress, and waits until every path answers.
func (s *soak) setUp() {
	t, c := s.t, s.c
	k := c.kubectl
	k.MustRun(examples(t), "apply", "-f", "-")
	k.MustRun("", "expose", "deployment", "hostnames", "--name", "hostnames-lb", "--type", "LoadBalancer", "--port", "80", "--target-port", "9376")
	k.MustRun(`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: hostnames}
spec:
  rules:
  - host: hostnames.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: hostnames, port: {number: 80}}}}
`, "apply", "-f", "-")
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(c.home, c.name, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst, rc.Timeout = 100, 100, 5*time.Second
	s.rc, s.client = rc, kubernetes.NewForConfigOrDie(rc)
	addr := func(what string, args ...string) string {
		var ip string
		c.until(what, time.Minute, func() bool {
			ip, _, _ = k.Run("", append(args, "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")...)
			return ip != ""
		})
		return ip
	}
	lbIP := addr("hostnames-lb's address", "get", "service", "hostnames-lb")
	ingressIP := addr("the ingress controller's address", "-n", "ingress-svcnet", "get", "service", "ingress-controller")
	clusterIP := k.MustRun("", "get", "service", "hostnames", "-o", "jsonpath={.spec.clusterIP}")
	c.until("every API server ready", time.Minute, s.allAPIReady)
	c.until("3 hostnames pods ready", 2*time.Minute, readyPods(s.client, "default", "app=hostnames", 3))
	c.until("2 DNS pods ready", time.Minute, readyPods(s.client, "kube-system", "k8s-app=kube-dns", 2))
	c.until("2 ingress pods ready", time.Minute, readyPods(s.client, "ingress-svcnet", "app.kubernetes.io/name=ingress-controller", 2))

	client, node2 := s.ns("client"), s.ns("node-2")
	s.targets = []loadgen.Target{
		{Name: "ClusterIP", URL: "http://" + clusterIP + ":80/", Rate: soakRate, Dial: nsDialer(node2), Timeline: true},
		{Name: "NodePort", URL: "http://172.18.0.11:8477/", Rate: soakRate, Dial: nsDialer(client), Timeline: true},
		{Name: "LoadBalancer", URL: "http://" + lbIP + ":80/", Rate: soakRate, Dial: nsDialer(client), Timeline: true},
		{Name: "Ingress", URL: "http://" + ingressIP + "/", Host: "hostnames.example", Rate: soakRate, Dial: nsDialer(client), Timeline: true},
	}
	c.untilAnswering(s.targets...)
	for _, tc := range []struct{ server, name string }{
		{"10.96.0.10:53", "hostnames.default.svc.cluster.local."},
		{"169.254.20.10:53", "hostnames.default.svc.cluster.local."},
	} {
		c.until("DNS at "+tc.server, 30*time.Second, func() bool { return lookup(node2, tc.server, tc.name, dns.RcodeSuccess) == "" })
	}
	// The sampler's conntrack count read inside a namespace, against the
	// conntrack tool's, once.
	n, err := conntrackEntries(s.ns("node-2"))
	tool, _ := c.exec("node/node-2", "conntrack", "-C")
	t.Logf("node-2's conntrack table: %v entries read by the sampler, %s by conntrack -C (%v)", n, strings.TrimSpace(tool), err)
}

// run drives the load for the plan's duration while the rollouts, the
// churn, the faults and the sampler run, and stops the load only once
// every fault has been recovered from (or given up on) and the churn has
// deleted what it made.
func (s *soak) run() {
	s.start, s.loadStart = time.Now(), loadAverage()
	s.t.Logf("soak: %v from %s; rollouts every %v, a fault every %v, samples every %v, churn every %v",
		s.plan.Duration, s.start.Format("15:04:05"), s.plan.RolloutEvery, s.plan.FaultEvery, s.plan.SampleEvery, s.plan.ChurnEvery)
	load, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var loadWG sync.WaitGroup
	var httpResults []loadgen.Result
	var dnsOutcomes, cacheOutcomes []loadgen.Outcome
	node2 := s.ns("node-2")
	inflight := soakRate * int(resolverTimeout/time.Second) * resolverTries // the client is never the limit
	loadWG.Add(3)
	go func() { defer loadWG.Done(); httpResults = loadgen.Run(load, s.targets...) }()
	go func() {
		defer loadWG.Done()
		dnsOutcomes = loadgen.Every(load, soakRate, inflight, func() string {
			return resolve(node2, "10.96.0.10:53", "hostnames.default.svc.cluster.local.", dns.RcodeSuccess)
		})
	}()
	go func() {
		defer loadWG.Done()
		// A new name every time, so that each lookup misses the cache
		// and reaches a replica (as in TestFaultsUnderLoad).
		var n atomic.Int64
		cacheOutcomes = loadgen.Every(load, soakRate, inflight, func() string {
			return resolve(node2, "169.254.20.10:53", fmt.Sprintf("soak-nx-%07d.default.svc.cluster.local.", n.Add(1)), dns.RcodeNameError)
		})
	}()

	work, stopWork := context.WithCancel(context.Background())
	defer stopWork()
	var workWG sync.WaitGroup
	workWG.Add(3)
	go func() { defer workWG.Done(); s.rolloutLoop(work) }()
	go func() { defer workWG.Done(); s.churnLoop(work) }()
	go func() { defer workWG.Done(); s.sampleLoop(work) }()

	s.faultLoop()
	if rest := time.Until(s.start.Add(s.plan.Duration)); rest > 0 {
		time.Sleep(rest)
	}
	stopWork()
	workWG.Wait()
	time.Sleep(3 * time.Second) // the last requests after the last change
	stopLoad()
	loadWG.Wait()
	s.end, s.loadEnd = time.Now(), loadAverage()
	for i, r := range httpResults {
		kept, lost := splitLost(r.Outcomes, s.faults)
		s.paths = append(s.paths, soakPath{name: s.targets[i].Name, outcomes: kept, stalls: r.Stalls, lost: lost})
	}
	s.paths = append(s.paths, soakPath{name: "DNS via ClusterIP", outcomes: dnsOutcomes}, soakPath{name: "DNS via node-local cache", outcomes: cacheOutcomes})
}

// resolve asks as a pod's resolver does: resolverTries tries, each from
// a new socket; a failure's kind names every try's ("refused then
// timeout"), to tell a dead replica's refusal from a lost answer.
func resolve(ns, server, name string, rcode int) string {
	var kinds []string
	for range resolverTries {
		kind := lookup(ns, server, name, rcode)
		if kind == "" {
			return ""
		}
		kinds = append(kinds, kind)
	}
	return strings.Join(kinds, " then ")
}

// rolloutLoop runs `kubectl rollout restart deployment/hostnames` every
// RolloutEvery and times each rollout until it is complete and the old
// pods are gone, judged from the Deployment and the pods rather than by
// `kubectl rollout status`, whose watch a killed API server would end.
func (s *soak) rolloutLoop(ctx context.Context) {
	tick := time.NewTicker(s.plan.RolloutEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r := rolloutRecord{At: time.Now()}
		out, errOut, err := s.c.kubectl.Run("", "rollout", "restart", "deployment/hostnames")
		if err != nil {
			r.Problem = fmt.Sprintf("kubectl rollout restart: %v: %s%s", err, out, errOut)
		} else {
			deadline := time.Now().Add(3 * time.Minute)
			for !r.Complete && time.Now().Before(deadline) {
				time.Sleep(250 * time.Millisecond)
				r.Complete = s.rolloutDone()
			}
			r.Took = time.Since(r.At)
			if !r.Complete {
				r.Problem = "not complete after 3m"
			}
		}
		s.mu.Lock()
		s.rollouts = append(s.rollouts, r)
		s.mu.Unlock()
	}
}

// rolloutDone: the Deployment's pods are all of the new template, ready,
// and no old pod is left, terminating or not.
func (s *soak) rolloutDone() bool {
	ctx := context.Background()
	d, err := s.client.AppsV1().Deployments("default").Get(ctx, "hostnames", metav1.GetOptions{})
	if err != nil {
		return false
	}
	want := *d.Spec.Replicas
	st := d.Status
	if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != want || st.Replicas != want || st.AvailableReplicas != want || st.ReadyReplicas != want {
		return false
	}
	pods, err := s.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=hostnames"})
	return err == nil && len(pods.Items) == int(want)
}

// churnLoop creates a Service, an Ingress or a pod (in turn) every
// ChurnEvery and deletes each ChurnLife later: a bounded number of
// objects (ChurnLife/ChurnEvery) at any time, every proxy, the DNS and
// the ingress controller following them all along. A create the API
// acknowledged whose delete finds nothing is a lost write.
func (s *soak) churnLoop(ctx context.Context) {
	type live struct {
		kind, name string
		at         time.Time
	}
	var alive []live
	tick := time.NewTicker(s.plan.ChurnEvery)
	defer tick.Stop()
	kinds := []string{"Service", "Ingress", "Pod"}
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			for _, o := range alive {
				for deadline := time.Now().Add(30 * time.Second); !s.churnDelete(o.kind, o.name) && time.Now().Before(deadline); {
					time.Sleep(s.plan.ChurnEvery)
				}
			}
			s.churnLeftover()
			return
		case <-tick.C:
		}
		if len(alive) > 0 && time.Since(alive[0].at) >= s.plan.ChurnLife {
			// A delete the API did not answer (one in flight on a killed
			// API server) is recorded as failed and tried again at the
			// next tick: the object must go all the same.
			if s.churnDelete(alive[0].kind, alive[0].name) {
				alive = alive[1:]
			}
			continue
		}
		kind := kinds[n%len(kinds)]
		name := fmt.Sprintf("churn-%s-%05d", strings.ToLower(kind), n)
		if s.churnCreate(kind, name, n) {
			alive = append(alive, live{kind, name, time.Now()})
		}
	}
}

func (s *soak) churnCreate(kind, name string, n int) bool {
	ctx, sent := context.Background(), time.Now()
	meta := metav1.ObjectMeta{Name: name, Labels: map[string]string{"soak": "churn"}}
	var err error
	switch kind {
	case "Service":
		svc := &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "hostnames"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(9376), Protocol: corev1.ProtocolTCP}}}}
		if n%2 == 1 { // every other one takes a node port too
			svc.Spec.Type = corev1.ServiceTypeNodePort
		}
		_, err = s.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	case "Ingress":
		prefix := networkingv1.PathTypePrefix
		ing := &networkingv1.Ingress{ObjectMeta: meta, Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			Host: name + ".example",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "hostnames", Port: networkingv1.ServiceBackendPort{Number: 80}}},
			}}}},
		}}}}
		_, err = s.client.NetworkingV1().Ingresses("default").Create(ctx, ing, metav1.CreateOptions{})
	case "Pod":
		pod := &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "pause", Image: "pause"}}}}
		_, err = s.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	}
	s.recordChurn(sent, kind, "create", name, err)
	return err == nil
}

// churnDelete deletes the object and tells whether it is gone.
func (s *soak) churnDelete(kind, name string) bool {
	ctx, sent := context.Background(), time.Now()
	var err error
	switch kind {
	case "Service":
		err = s.client.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{})
	case "Ingress":
		err = s.client.NetworkingV1().Ingresses("default").Delete(ctx, name, metav1.DeleteOptions{})
	case "Pod":
		err = s.client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{})
	}
	s.recordChurn(sent, kind, "delete", name, err)
	return err == nil || apierrors.IsNotFound(err)
}

// recordChurn records a request sent at sent (when a fault that cut it
// off struck, not when the client gave up).
//
// A delete that finds nothing lost an acknowledged create, unless an
// earlier delete of the same object was cut off without an answer: that
// one may have committed (a fault that kills the API server after the
// etcd write and before the answer), and the object is gone as asked.
func (s *soak) recordChurn(sent time.Time, kind, op, name string, err error) {
	o := churnOp{At: sent, Took: time.Since(sent), Kind: kind, Op: op, Name: name}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
	case op == "delete" && apierrors.IsNotFound(err):
		if !s.cutOff(kind, name) {
			o.Result = "not found: acknowledged create lost"
		}
	default:
		o.Result = apiErrorKind(err)
	}
	s.churnOps = append(s.churnOps, o)
}

// cutOff reports whether a delete of the object got no answer: a
// failure that is not the API's (closed, reset, timeout).
func (s *soak) cutOff(kind, name string) bool {
	return slices.ContainsFunc(s.churnOps, func(o churnOp) bool {
		return o.Kind == kind && o.Name == name && o.Op == "delete" && o.Result != "" && !strings.HasPrefix(o.Result, "api ")
	})
}

// churnLeftover waits (2 minutes at most) until no churn object is left,
// pods included (a deleted pod goes once its node has stopped it), and
// keeps those that stay.
func (s *soak) churnLeftover() {
	sel := metav1.ListOptions{LabelSelector: "soak=churn"}
	var left []string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		left = left[:0]
		ctx := context.Background()
		svcs, err1 := s.client.CoreV1().Services("default").List(ctx, sel)
		ings, err2 := s.client.NetworkingV1().Ingresses("default").List(ctx, sel)
		pods, err3 := s.client.CoreV1().Pods("default").List(ctx, sel)
		if err := cmp.Or(err1, err2, err3); err != nil {
			left = append(left, "list: "+err.Error())
			continue
		}
		for _, o := range svcs.Items {
			left = append(left, "Service "+o.Name)
		}
		for _, o := range ings.Items {
			left = append(left, "Ingress "+o.Name)
		}
		for _, o := range pods.Items {
			left = append(left, "Pod "+o.Name)
		}
		if len(left) == 0 {
			break
		}
	}
	s.mu.Lock()
	s.leftover = slices.Clone(left)
	s.mu.Unlock()
}

// soakFault breaks one component; round counts its turns, so that each
// turn strikes another host or replica, and alternates how a replica
// goes (killed, or its pod deleted).
type soakFault struct {
	name string
	do   func(round int) (how string, recovered func() bool, err error)
}

// servingFaults are the faults whose kills strike serving processes, by
// name, with the namespace of those pods: the requests in flight to them
// are lost with them (splitLost), which their exits tell.
var servingFaults = map[string]string{"DNS replica": "kube-system/", "ingress replica": "ingress-svcnet/"}

func (s *soak) faultTable() []soakFault {
	state := filepath.Join(s.c.home, s.c.name)
	proxyOf := func(node string) []string {
		return []string{" proxy ", "--kubeconfig=/var/lib/kube-proxy/kubeconfig.conf", "--hostname-override=" + node, "netns=" + s.ns(node), notShim}
	}
	agentOf := func(node string) []string { return []string{" node ", state + "/in-cluster/" + node + ".kubeconfig"} }
	processOf := func(host, what string) []string { return []string{" " + what + " ", "netns=" + s.ns(host)} }
	ingressSel := "app.kubernetes.io/name=ingress-controller"
	// replica kills one replica's process (SIGKILL; its container
	// restarts in the same pod) in even rounds and deletes a replica's
	// pod (graceful; the Deployment makes another) in odd ones, or the
	// other way round with killFirst false.
	replica := func(round int, killFirst bool, ns, selector string, parts ...string) (string, func() bool, error) {
		ready := readyPods(s.client, ns, selector, 2)
		if (round%2 == 0) == killFirst {
			pids := s.c.pidsWith(parts...)
			if len(pids) == 0 {
				return "", nil, fmt.Errorf("no process of %q", parts)
			}
			pid := pids[round/2%len(pids)]
			where := s.netnsOf(pid)
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				return "", nil, err
			}
			time.Sleep(time.Second) // its pod to be seen not ready before waiting for both
			return "kill -9 the process in " + where, ready, nil
		}
		pods, err := s.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(pods.Items) == 0 {
			return "", nil, fmt.Errorf("no pod of %s: %v", selector, err)
		}
		slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		old := pods.Items[round/2%len(pods.Items)]
		if err := s.client.CoreV1().Pods(ns).Delete(context.Background(), old.Name, metav1.DeleteOptions{}); err != nil {
			return "", nil, err
		}
		return "delete pod " + old.Name + " on " + old.Spec.NodeName, func() bool { return s.podGone(ns, old.Name) && ready() }, nil
	}
	return []soakFault{
		{"API server", func(round int) (string, func() bool, error) {
			cp := soakCPs[round%3]
			old, err := s.kill(processOf(cp, "apiserver")...)
			return "kill -9 " + cp + "'s API server", func() bool { return s.back(old, processOf(cp, "apiserver")...) && s.allAPIReady() }, err
		}},
		{"controller manager", func(int) (string, func() bool, error) {
			held := s.leader()
			_, pidText, _ := strings.Cut(held, "_")
			pid, err := strconv.Atoi(pidText)
			if err != nil {
				return "", nil, fmt.Errorf("leader identity %q: want host_pid", held)
			}
			where := s.netnsOf(pid)
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				return "", nil, err
			}
			return "kill -9 the leading controller manager (" + where + ")", func() bool {
				l := s.leader()
				return l != "" && l != held && len(s.c.pidsWith(" controller-manager ", "netns="+s.ns("cp-*"))) == 3
			}, nil
		}},
		{"service proxy", func(round int) (string, func() bool, error) {
			node := soakNodes[round%3]
			old, err := s.kill(proxyOf(node)...)
			ip := "172.18.0." + strconv.Itoa(11+round%3)
			return "kill -9 " + node + "'s proxy", func() bool {
				return s.back(old, proxyOf(node)...) && s.c.healthz(s.ns(node), "http://"+ip+":10256/healthz")
			}, err
		}},
		{"DNS replica", func(round int) (string, func() bool, error) {
			return replica(round, true, "kube-system", "k8s-app=kube-dns", " dns ", "--listen=0.0.0.0:53", "netns="+s.ns("*"), notShim)
		}},
		{"node agent", func(round int) (string, func() bool, error) {
			// node-2's first: the ClusterIP and DNS traffic comes from it.
			node := soakNodes[(round+1)%3]
			before := containerStarts(s.client, node)
			old, err := s.kill(agentOf(node)...)
			return "kill -9 " + node + "'s agent", func() bool {
				if !s.back(old, agentOf(node)...) || !nodeReady(s.client, node) || !readyPods(s.client, "kube-system", "k8s-app=kube-dns", 2)() ||
					!readyPods(s.client, "ingress-svcnet", ingressSel, 2)() || !s.deploymentAvailable("hostnames", 3) {
					return false
				}
				// Containers outlive their agent and are adopted: those still
				// there keep their starts (pods that came and went meanwhile,
				// the rollouts' and the churn's, are not compared).
				after := containerStarts(s.client, node)
				for k, v := range before {
					if a, ok := after[k]; ok && a != v {
						s.t.Errorf("after %s's agent restarted, %s is %q, was %q: restarted, not adopted", node, k, a, v)
					}
				}
				return true
			}, err
		}},
		{"ingress replica", func(round int) (string, func() bool, error) {
			return replica(round, false, "ingress-svcnet", ingressSel, " ingress ", "--ingress-class=svcnet", "netns="+s.ns("*"), notShim)
		}},
	}
}

// faultLoop strikes the faults of the plan's slots in turn (the table's
// order, round after round) and the etcd member's kill once, each when
// its time comes or once the one before has recovered, and waits for
// each to recover (3 minutes at most) before the next.
func (s *soak) faultLoop() {
	table := s.faultTable()
	slots, etcdAt := s.plan.faultSlots()
	type event struct {
		at    time.Duration
		fault soakFault
		round int
	}
	var events []event
	for i, at := range slots {
		events = append(events, event{at, table[i%len(table)], i / len(table)})
	}
	events = append(events, event{etcdAt, soakFault{"etcd member", func(int) (string, func() bool, error) {
		old, err := s.kill(" etcd ", "netns="+s.ns("cp-2"))
		return "kill -9 cp-2's etcd member", func() bool {
			return s.back(old, " etcd ", "netns="+s.ns("cp-2")) && s.memberHealthy(0) && s.memberHealthy(1) && s.memberHealthy(2) && s.allAPIReady()
		}, err
	}}, 0})
	slices.SortStableFunc(events, func(a, b event) int { return cmp.Compare(a.at, b.at) })
	for _, e := range events {
		if wait := time.Until(s.start.Add(e.at)); wait > 0 {
			time.Sleep(wait)
		}
		r := faultRecord{Name: e.fault.name, At: time.Now()}
		how, recovered, err := e.fault.do(e.round)
		r.How = how
		if err != nil {
			r.Problem = err.Error()
		} else {
			for deadline := r.At.Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if recovered() {
					r.Recovered = true
					break
				}
			}
			if !r.Recovered {
				r.Problem = "not recovered after 3m"
			}
		}
		r.Took = time.Since(r.At)
		if ns := servingFaults[e.fault.name]; ns != "" && strings.HasPrefix(how, "kill -9") {
			r.Ended = s.c.exitedAt(r.At, ns)
		}
		time.Sleep(3 * time.Second) // stragglers land in this fault's window
		r.To = time.Now()
		s.t.Logf("%s %s: %s, recovered %v in %.1fs %s", r.At.Format("15:04:05"), r.Name, r.How, r.Recovered, r.Took.Seconds(), r.Problem)
		s.mu.Lock()
		s.faults = append(s.faults, r)
		s.mu.Unlock()
	}
}

// notShim leaves out the container shims: a pod's shim runs in its
// node's namespace with the container's command line in its own, so
// without it a pattern for a proxy, a DNS or an ingress replica matches
// the shim too (and killing the shim kills the container only by its
// parent-death signal).
const notShim = "!container-shim"

// kill SIGKILLs the one process whose command line has parts.
func (s *soak) kill(parts ...string) (int, error) {
	pids := s.c.pidsWith(parts...)
	if len(pids) != 1 {
		return 0, fmt.Errorf("processes %v of %q: want one", pids, parts)
	}
	return pids[0], syscall.Kill(pids[0], syscall.SIGKILL)
}

// back: one process of parts runs again, not old.
func (s *soak) back(old int, parts ...string) bool {
	pids := s.c.pidsWith(parts...)
	return len(pids) == 1 && pids[0] != old
}

// netnsOf names the namespace of a cluster process ("node-1-3fa2…").
func (s *soak) netnsOf(pid int) string {
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return "?"
	}
	names, _ := filepath.Glob("/run/netns/" + s.ns("*"))
	for _, n := range names {
		var st syscall.Stat_t
		if syscall.Stat(n, &st) == nil && link == fmt.Sprintf("net:[%d]", st.Ino) {
			return strings.TrimPrefix(filepath.Base(n), s.ns(""))
		}
	}
	return "host"
}

func (s *soak) podGone(ns, name string) bool {
	_, err := s.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

// deploymentAvailable: at least want of the Deployment's pods are
// available (a rollout surges one and keeps all three available).
func (s *soak) deploymentAvailable(name string, want int32) bool {
	d, err := s.client.AppsV1().Deployments("default").Get(context.Background(), name, metav1.GetOptions{})
	return err == nil && d.Status.AvailableReplicas >= want
}

func (s *soak) leader() string {
	l, err := s.client.CoordinationV1().Leases("kube-system").Get(context.Background(), "svcnet-controller-manager", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// httpsFrom is an HTTPS client that connects from inside namespace ns,
// trusting caFile, with the client certificate cert (none if empty).
func httpsFrom(ns, caFile string, cert *tls.Certificate) (*http.Client, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cfg := &tls.Config{RootCAs: pool}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: cfg, DialContext: nsDialer(ns)}}, nil
}

func httpGet(hc *http.Client, url string) (string, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(body), err
}

// apiReady: control plane i's API server answers /readyz, asked on its
// own address (not through the balancer).
func (s *soak) apiReady(i int) bool {
	hc, err := httpsFrom(s.ns(soakCPs[i]), filepath.Join(s.c.home, s.c.name, "apiserver", "pki", "ca.crt"), nil)
	if err != nil {
		return false
	}
	body, err := httpGet(hc, "https://"+cpIP(i)+":6443/readyz")
	return err == nil && body == "ok"
}

func (s *soak) allAPIReady() bool { return s.apiReady(0) && s.apiReady(1) && s.apiReady(2) }

// etcdClient asks control plane i's etcd member with the member's own
// certificate, as TestHighlyAvailableControlPlane does.
func (s *soak) etcdClient(i int) (*http.Client, error) {
	dir := filepath.Join(s.c.home, s.c.name, "control-planes", soakCPs[i], "etcd-pki")
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"))
	if err != nil {
		return nil, err
	}
	return httpsFrom(s.ns(soakCPs[i]), filepath.Join(s.c.home, s.c.name, "apiserver", "pki", "etcd", "ca.crt"), &cert)
}

func (s *soak) memberHealthy(i int) bool {
	hc, err := s.etcdClient(i)
	if err != nil {
		return false
	}
	body, err := httpGet(hc, "https://"+cpIP(i)+":2379/health")
	return err == nil && strings.Contains(body, `"health":"true"`)
}

// sampleLoop samples every SampleEvery, from the start.
func (s *soak) sampleLoop(ctx context.Context) {
	tick := time.NewTicker(s.plan.SampleEvery)
	defer tick.Stop()
	for {
		s.sample()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// soakProc is a component to sample, and how to read its goroutines.
type soakProc struct {
	key        string
	pid        int
	goroutines func() (float64, error) // nil: it serves no go_goroutines
}

// procs finds the cluster's components: the supervisor; per control
// plane its etcd member, API server and controller manager; the edge;
// per node its agent, node-local DNS cache and proxy; and the DNS and
// ingress replicas, named by their pods' namespaces (a replica's
// container restarts in the same one; a deleted pod's successor is a new
// component).
func (s *soak) procs() []soakProc {
	state := filepath.Join(s.c.home, s.c.name)
	var out []soakProc
	// add adds the processes of parts as key; a key ending in "@" (a
	// replica's) is completed with each one's namespace.
	add := func(key string, goroutines func(pid int) func() (float64, error), parts ...string) {
		for _, pid := range s.c.pidsWith(parts...) {
			p := soakProc{key: key, pid: pid}
			if strings.HasSuffix(key, "@") {
				p.key += s.netnsOf(pid)
			}
			if goroutines != nil {
				p.goroutines = goroutines(pid)
			}
			out = append(out, p)
		}
	}
	scrape := func(ns, url string) func(int) func() (float64, error) {
		return func(int) func() (float64, error) {
			return func() (float64, error) {
				return goroutinesAt(&http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: nsDialer(ns)}}, url)
			}
		}
	}
	// In a pod's own namespace: its metrics port on loopback.
	inPod := func(port string) func(int) func() (float64, error) {
		return func(pid int) func() (float64, error) {
			return scrape(s.ns(s.netnsOf(pid)), "http://127.0.0.1:"+port+"/metrics")(pid)
		}
	}
	if data, err := os.ReadFile(filepath.Join(state, "supervisor.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			out = append(out, soakProc{key: "supervisor", pid: pid})
		}
	}
	for i, cp := range soakCPs {
		add(cp+" etcd", func(int) func() (float64, error) {
			return func() (float64, error) {
				hc, err := s.etcdClient(i)
				if err != nil {
					return 0, err
				}
				return goroutinesAt(hc, "https://"+cpIP(i)+":2379/metrics")
			}
		}, " etcd ", "netns="+s.ns(cp))
		add(cp+" apiserver", func(int) func() (float64, error) {
			return func() (float64, error) {
				// The admin's client certificate, on the server's own address.
				cfg := rest.CopyConfig(s.rc)
				cfg.Host = "https://" + cpIP(i) + ":6443"
				cfg.Dial = nsDialer(s.ns(cp))
				cfg.Timeout = 2 * time.Second
				hc, err := rest.HTTPClientFor(cfg)
				if err != nil {
					return 0, err
				}
				defer hc.CloseIdleConnections()
				return goroutinesAt(hc, cfg.Host+"/metrics")
			}
		}, " apiserver ", "netns="+s.ns(cp))
		// The controller manager serves no metrics in svcnet up.
		add(cp+" controller-manager", nil, " controller-manager ", "netns="+s.ns(cp))
	}
	add("edge", nil, " edge ", state+"/in-cluster/proxy.kubeconfig")
	for i, node := range soakNodes {
		add(node+" agent", nil, " node ", state+"/in-cluster/"+node+".kubeconfig")
		// The agent's own command line names the cache's (--node-cache-command).
		add(node+" node-cache", scrape(s.ns(node), "http://127.0.0.1:9253/metrics"), " node-cache ", "netns="+s.ns(node), "!--node-cache-command")
		add(node+" proxy", scrape(s.ns(node), fmt.Sprintf("http://172.18.0.%d:10249/metrics", 11+i)),
			" proxy ", "--kubeconfig=/var/lib/kube-proxy/kubeconfig.conf", "--hostname-override="+node, "netns="+s.ns(node), notShim)
	}
	add("dns@", inPod("9153"), " dns ", "--listen=0.0.0.0:53", "netns="+s.ns("*"), notShim)
	add("ingress@", inPod("10254"), " ingress ", "--ingress-class=svcnet", "netns="+s.ns("*"), notShim)
	return out
}

func goroutinesAt(hc *http.Client, url string) (float64, error) {
	body, err := httpGet(hc, url)
	if err != nil {
		return 0, err
	}
	m, err := framework.ParseMetrics(body)
	if err != nil {
		return 0, err
	}
	v, ok := m.Value("go_goroutines")
	if !ok {
		return 0, fmt.Errorf("%s: no go_goroutines", url)
	}
	return v, nil
}

// sample records every component's RSS, open files and goroutines, and
// every node's (and the edge's) conntrack entries.
func (s *soak) sample() {
	at := time.Now()
	_, leaderPID, _ := strings.Cut(s.leader(), "_")
	var ps []procSample
	for _, p := range s.procs() {
		rss, err1 := rssOf(p.pid)
		fds, err2 := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid))
		if err1 != nil || err2 != nil {
			continue // gone meanwhile
		}
		g := math.NaN()
		if p.goroutines != nil {
			if v, err := p.goroutines(); err == nil {
				g = v
			}
		}
		ps = append(ps, procSample{At: at, Key: p.key, PID: p.pid, RSS: rss, FDs: float64(len(fds)), Goroutines: g,
			Leading: strings.HasSuffix(p.key, "controller-manager") && leaderPID == strconv.Itoa(p.pid)})
	}
	var cs []conntrackSample
	for _, where := range append(slices.Clone(soakNodes), "edge") {
		if n, err := conntrackEntries(s.ns(where)); err == nil {
			cs = append(cs, conntrackSample{At: at, Where: where, Entries: n})
		}
	}
	s.mu.Lock()
	s.samples = append(s.samples, ps...)
	s.conntrack = append(s.conntrack, cs...)
	s.mu.Unlock()
}

// rssOf is a process's resident set size in bytes (VmRSS).
func rssOf(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("pid %d: no VmRSS", pid)
}

// conntrackEntries is the size of the conntrack table of namespace ns:
// nf_conntrack_count as read from inside it (net sysctls are the reading
// thread's namespace's).
func conntrackEntries(ns string) (float64, error) {
	var n float64
	err := netns.Do(ns, func() error {
		data, err := os.ReadFile("/proc/sys/net/netfilter/nf_conntrack_count")
		if err != nil {
			return err
		}
		n, err = strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
		return err
	})
	return n, err
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
