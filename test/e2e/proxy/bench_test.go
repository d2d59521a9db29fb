package proxy_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/test/e2e/framework"
	"github.com/svcnet/svcnet/test/vm"
)

// syncLine is the proxier's log line for one sync.
// (slog quotes the list of changes when it has more than one.)
var syncLine = regexp.MustCompile(`msg="synced (?:iptables|nftables|ipvs|ebpf) rules".* full=(true|false) took=(\S+) changed="?\[([^\]]*)\]`)

type syncEvent struct {
	at      time.Time
	full    bool
	took    time.Duration
	changed []string
}

// syncWatcher collects the proxy's sync log lines as they arrive.
type syncWatcher struct {
	// exited, when set, tells that the proxy is gone: wait fails at
	// once rather than at its timeout.
	exited func() bool
	mu     sync.Mutex
	events []syncEvent
	notify chan struct{}
}

func (w *syncWatcher) line(l string) {
	m := syncLine.FindStringSubmatch(l)
	if m == nil {
		return
	}
	took, _ := time.ParseDuration(m[2])
	ev := syncEvent{at: time.Now(), full: m[1] == "true", took: took, changed: strings.Fields(m[3])}
	w.mu.Lock()
	w.events = append(w.events, ev)
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// wait returns the first sync after index from whose changes include
// port (or, when port is "", the first full sync).
func (w *syncWatcher) wait(tb testing.TB, from int, port string, timeout time.Duration) (syncEvent, int) {
	tb.Helper()
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		for i := from; i < len(w.events); i++ {
			ev := w.events[i]
			if (port == "" && ev.full) || (port != "" && slices.Contains(ev.changed, port)) {
				w.mu.Unlock()
				return ev, i + 1
			}
		}
		w.mu.Unlock()
		select {
		case <-w.notify:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			tb.Fatalf("no sync of %q within %s", port, timeout)
		}
		if w.exited != nil && w.exited() {
			tb.Fatalf("the proxy exited before a sync of %q", port)
		}
	}
}

// benchSlice is service i's slice: ten endpoints on another node, the
// first ready or not.
func benchSlice(i int, firstReady bool) *discovery.EndpointSlice {
	name := fmt.Sprintf("svc-%d", i)
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Namespace: "default", Labels: map[string]string{
			discovery.LabelServiceName: name, discovery.LabelManagedBy: "svcnet-bench"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for j := range 10 {
		r := j != 0 || firstReady
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{
			Addresses: []string{fmt.Sprintf("10.%d.%d.%d", 128+j, i/250, i%250+1)}, NodeName: ptr.To("node-b"),
			Conditions: discovery.EndpointConditions{Ready: ptr.To(r), Serving: ptr.To(r), Terminating: ptr.To(false)}})
	}
	return s
}

// writeChange makes the first endpoint of service k ready or not, and
// returns when the write started (also the slice's trigger time, as the
// EndpointSlice controller sets it).
func writeChange(tb testing.TB, ctx context.Context, client kubernetes.Interface, k int, ready bool) time.Time {
	tb.Helper()
	s := benchSlice(k, ready)
	old, err := client.DiscoveryV1().EndpointSlices("default").Get(ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	s.ResourceVersion = old.ResourceVersion
	start := time.Now()
	s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: start.Format(time.RFC3339Nano)}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		tb.Fatal(err)
	}
	return start
}

// populate creates n ClusterIP services with ten endpoints each.
func populate(tb testing.TB, client kubernetes.Interface, n int) {
	tb.Helper()
	ctx := framework.Context(tb, 30*time.Minute)
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i), Namespace: "default"},
					Spec: v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
				_, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
				if err == nil {
					_, err = client.DiscoveryV1().EndpointSlices("default").Create(ctx, benchSlice(i, true), metav1.CreateOptions{})
				}
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		tb.Fatal(firstErr)
	}
}

// benchProxy is an API server with n services and `svcnet proxy` in a
// namespace of its own, after its first (full) sync.
type benchProxy struct {
	proc     *framework.Process
	client   kubernetes.Interface
	watch    *syncWatcher
	fullSync time.Duration // as the proxier timed it
	ready    time.Duration // from the start of the process to the end of the full sync
	seen     int
	ready0   map[int]bool // service -> its first endpoint is ready
}

var benchSetups sync.Map // "mode/n" -> *benchProxy, kept across the harness's calls

func setupBench(b, parent *testing.B, mode string, n int) *benchProxy {
	key := fmt.Sprintf("%s/%d", mode, n)
	if v, ok := benchSetups.Load(key); ok {
		return v.(*benchProxy)
	}
	framework.RequireRoot(b)
	// Everything belongs to the parent benchmark, which the harness runs
	// once: the sub-benchmark's function runs several times.
	api := framework.StartAPIServer(parent)
	bp := &benchProxy{client: api.Client(), watch: &syncWatcher{notify: make(chan struct{}, 1)}, ready0: map[int]bool{}}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.77.1"}}}}
	if _, err := bp.client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		parent.Fatal(err)
	}
	t0 := time.Now()
	populate(parent, bp.client, n)
	parent.Logf("%d services with 10 endpoints each created in %s", n, time.Since(t0).Round(time.Millisecond))
	ns := framework.NewNetns(parent, "bench")
	ns.ForwardAPIServer(api)
	start := time.Now()
	proc := framework.StartProcessInWatched(parent, ns, bp.watch.line, "proxy", "--kubeconfig", api.KubeconfigOf("proxy"),
		"--proxy-mode", mode, "--hostname-override", "node-a", "--cluster-cidr", "10.244.0.0/16",
		"--metrics-bind-address", "0", "--healthz-bind-address", "0")
	ev, seen := bp.watch.wait(parent, 0, "", 20*time.Minute)
	if proc.Exited() {
		parent.Fatalf("proxy exited:\n%s", proc.Logs())
	}
	bp.fullSync, bp.ready, bp.seen, bp.proc = ev.took, ev.at.Sub(start), seen, proc
	parent.Logf("%d services: full sync took %s (%s from process start)", n, bp.fullSync, bp.ready.Round(time.Millisecond))
	for i := range n {
		bp.ready0[i] = true
	}
	benchSetups.Store(key, bp)
	parent.Cleanup(func() { benchSetups.Delete(key) })
	return bp
}

// BenchmarkIPTablesProxy measures `svcnet proxy --proxy-mode iptables` in
// a network namespace (never the host's) against the real API server:
// the full sync of N services with 10 endpoints each, then, per
// iteration, one endpoint of a random service turning unready or ready
// again: the partial sync's duration and the network programming latency
// from the start of the API write to the rules being in the kernel.
//
//	go test ./test/e2e/proxy -run '^$' -bench IPTablesProxy -benchtime 200x -timeout 60m
func BenchmarkIPTablesProxy(b *testing.B) { benchmarkProxy(b, "iptables") }

// BenchmarkNFTablesProxy is the same for the nftables mode.
//
//	go test ./test/e2e/proxy -run '^$' -bench NFTablesProxy -benchtime 200x -timeout 60m
func BenchmarkNFTablesProxy(b *testing.B) { benchmarkProxy(b, "nftables") }

// BenchmarkProxyModesVM is the same benchmark for the ipvs, iptables and
// nftables modes, side by side in one boot of the test VM (this kernel
// has no IPVS): its absolute figures are the emulator's (Go runs about 7×
// slower there); the ratios between modes are what it measures.
//
//	go test ./test/e2e/proxy -run '^$' -bench ProxyModesVM -benchtime 50x -timeout 4h
func BenchmarkProxyModesVM(b *testing.B) {
	if !vm.InsideB(b, vm.Config{
		Timeout: 4 * time.Hour, MemoryMiB: 6144,
		Env:     []string{framework.BinaryEnv + "=" + framework.Binary(b)},
		Modules: []string{"ip_vs"},
	}) {
		return
	}
	for _, mode := range []string{"ipvs", "iptables", "nftables"} {
		b.Run(mode, func(b *testing.B) { benchmarkProxy(b, mode) })
	}
}

func benchmarkProxy(b *testing.B, mode string) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(sb *testing.B) {
			bp := setupBench(sb, b, mode, n)
			ctx := context.Background()
			var latencies, partials []time.Duration
			sb.ResetTimer()
			for i := 0; i < sb.N; i++ {
				k := rand.IntN(n)
				bp.ready0[k] = !bp.ready0[k]
				start := writeChange(sb, ctx, bp.client, k, bp.ready0[k])
				ev, seen := bp.watch.wait(sb, bp.seen, fmt.Sprintf("default/svc-%d:http/tcp", k), time.Minute)
				bp.seen = seen
				if ev.full {
					continue // a periodic full sync happened to take it
				}
				latencies = append(latencies, ev.at.Sub(start))
				partials = append(partials, ev.took)
				// Changes one at a time, as in kube-proxy's measurement:
				// past the minimum sync interval, so none coalesce.
				sb.StopTimer()
				time.Sleep(150*time.Millisecond + rand.N(100*time.Millisecond))
				sb.StartTimer()
			}
			sb.StopTimer()
			sb.ReportMetric(bp.fullSync.Seconds(), "full-sync-s")
			sb.ReportMetric(ms(framework.Percentile(partials, 50)), "partial-sync-p50-ms")
			sb.ReportMetric(ms(framework.Percentile(latencies, 50)), "latency-p50-ms")
			sb.ReportMetric(ms(framework.Percentile(latencies, 99)), "latency-p99-ms")
			sb.ReportMetric(ms(slices.Max(append(latencies, 0))), "latency-max-ms")
			rss, hwm := memory(bp.proc.PID())
			sb.ReportMetric(float64(hwm)/(1<<20), "peak-rss-MiB")
			sb.ReportMetric(0, "ns/op")
			if len(latencies) > 1 {
				sb.Logf("%s mode, %d services, %d changes: full sync %s; partial sync p50 %s p99 %s; programming latency p50 %s p99 %s max %s; RSS %d MiB (peak %d MiB)",
					mode, n, len(latencies), bp.fullSync, framework.Percentile(partials, 50), framework.Percentile(partials, 99),
					framework.Percentile(latencies, 50), framework.Percentile(latencies, 99), slices.Max(latencies), rss>>20, hwm>>20)
			}
		})
	}
}

// memory is a process's resident set and its peak, in bytes.
func memory(pid int) (rss, peak int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = v << 10
		case "VmHWM:":
			peak = v << 10
		}
	}
	return rss, peak
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
