package proxy_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

// kube-proxy's log lines (klog, -v 4) for the end of a sync and for the
// programming of one EndpointSlice's change, which it logs once the
// transaction that carries it has succeeded.
var (
	kpSyncDone    = regexp.MustCompile(`"SyncProxyRules complete" ipFamily="IPv4" elapsed="([^"]+)"`)
	kpProgrammed  = regexp.MustCompile(`"Network programming" ipFamily="IPv4" endpoint="([^"]+)"`)
	kpFullSyncing = regexp.MustCompile(`"Syncing nftables rules" ipFamily="IPv4" fullSync=true`)
)

// kpWatcher collects kube-proxy's IPv4 syncs and programmed changes.
type kpWatcher struct {
	mu         sync.Mutex
	full       []time.Duration // durations of the full syncs, as logged
	fullDone   []time.Time
	inFull     bool
	programmed map[string][]time.Time // Service namespace/name -> when
	notify     chan struct{}
}

func (w *kpWatcher) line(l string) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case kpFullSyncing.MatchString(l):
		w.inFull = true
	case kpSyncDone.MatchString(l):
		if w.inFull {
			d, _ := time.ParseDuration(kpSyncDone.FindStringSubmatch(l)[1])
			w.full, w.fullDone, w.inFull = append(w.full, d), append(w.fullDone, now), false
		}
	default:
		m := kpProgrammed.FindStringSubmatch(l)
		if m == nil {
			return
		}
		w.programmed[m[1]] = append(w.programmed[m[1]], now)
	}
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// waitFor returns when kube-proxy programmed the change to a Service made at or
// after since.
func (w *kpWatcher) waitFor(tb testing.TB, slice string, since time.Time, timeout time.Duration) time.Time {
	tb.Helper()
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		for _, at := range w.programmed[slice] {
			if !at.Before(since) {
				w.mu.Unlock()
				return at
			}
		}
		w.mu.Unlock()
		select {
		case <-w.notify:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			tb.Fatalf("kube-proxy did not program %s within %s", slice, timeout)
		}
	}
}

// versusProxy is one proxy (kube-proxy or svcnet's) over the benchmark's
// Services, after its first full sync.
type versusProxy struct {
	proc     *framework.Process
	fullSync time.Duration // as the proxy itself timed it
	ready    time.Duration // from the start of the process to the end of the full sync
	// programmed waits until the change written at start to service k is
	// in the kernel, and returns when; ok is false when a periodic full
	// sync took it.
	programmed func(tb testing.TB, k int, start time.Time) (at time.Time, ok bool)
}

// BenchmarkNFTablesVsKubeProxy measures svcnet's nftables mode beside
// Kubernetes' own kube-proxy v1.37.2 in its nftables mode, in the same
// run, against one API server holding N selector-less ClusterIP Services
// with 10 endpoints each: the first (full) sync, then one endpoint of a
// random Service turning unready or ready again, changes 1.1–1.3 s apart
// (past kube-proxy's 1 s minimum sync interval, so none coalesce), each
// timed from the start of the API write to the proxy saying the kernel
// has it: svcnet's log line for the sync, kube-proxy's "Network
// programming" line (-v 4), both written once the transaction succeeded.
// The proxies run one after the other, each in a namespace of its own,
// so that they do not share the two cores.
//
//	go test ./test/e2e/proxy -run '^$' -bench NFTablesVsKubeProxy -benchtime 100x -timeout 90m
func BenchmarkNFTablesVsKubeProxy(b *testing.B) {
	framework.RequireRoot(b)
	bin := kubeProxyPath(b)
	for _, n := range []int{1000, 10000} {
		api := framework.StartAPIServer(b)
		client := api.Client()
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
			Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.77.1"}}}}
		if _, err := client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		populate(b, client, n)
		ready0 := make([]bool, n)
		for i := range ready0 {
			ready0[i] = true
		}
		var prev *versusProxy
		for _, who := range versusProxies() {
			var vp *versusProxy
			b.Run(fmt.Sprintf("services=%d/proxy=%s", n, who), func(sb *testing.B) {
				if vp == nil {
					if prev != nil {
						prev.proc.Stop() // the cores are the next one's
					}
					vp = startVersus(b, api, who, bin)
					prev = vp
				}
				var lat []time.Duration
				ctx := context.Background()
				sb.ResetTimer()
				for range sb.N {
					k := rand.IntN(n)
					ready0[k] = !ready0[k]
					start := writeChange(sb, ctx, client, k, ready0[k])
					at, ok := vp.programmed(sb, k, start)
					if ok {
						lat = append(lat, at.Sub(start))
					}
					sb.StopTimer()
					time.Sleep(1100*time.Millisecond + rand.N(200*time.Millisecond))
					sb.StartTimer()
				}
				sb.StopTimer()
				_, hwm := memory(vp.proc.PID())
				sb.ReportMetric(vp.fullSync.Seconds(), "full-sync-s")
				sb.ReportMetric(vp.ready.Seconds(), "ready-s")
				sb.ReportMetric(ms(framework.Percentile(lat, 50)), "change-p50-ms")
				sb.ReportMetric(ms(framework.Percentile(lat, 99)), "change-p99-ms")
				sb.ReportMetric(ms(slices.Max(append(lat, 0))), "change-max-ms")
				sb.ReportMetric(float64(hwm)/(1<<20), "peak-rss-MiB")
				sb.ReportMetric(0, "ns/op")
				if len(lat) > 1 {
					sb.Logf("%s, %d services: full sync %s (ready %s after start); one change p50 %s p99 %s max %s (%d changes); peak RSS %d MiB",
						who, n, vp.fullSync.Round(time.Millisecond), vp.ready.Round(time.Millisecond), framework.Percentile(lat, 50),
						framework.Percentile(lat, 99), slices.Max(lat), len(lat), hwm>>20)
				}
			})
		}
		if prev != nil {
			prev.proc.Stop()
		}
	}
}

// versusProxies are the proxies BenchmarkNFTablesVsKubeProxy runs:
// kube-proxy, svcnet's nftables mode and its ebpf mode, or those
// SVCNET_VERSUS (e.g. svcnet,svcnet-ebpf) names.
func versusProxies() []string {
	if env := os.Getenv("SVCNET_VERSUS"); env != "" {
		return strings.Split(env, ",")
	}
	return []string{"kube-proxy", "svcnet", "svcnet-ebpf"}
}

// startVersus starts who's proxy in a namespace of its own, owned by the
// parent benchmark, and waits for its first full sync.
func startVersus(parent *testing.B, api *framework.APIServer, who, kubeProxy string) *versusProxy {
	ns := framework.NewNetns(parent, "versus")
	ns.ForwardAPIServer(api)
	vp := &versusProxy{}
	start := time.Now()
	if who == "kube-proxy" {
		w := &kpWatcher{programmed: map[string][]time.Time{}, notify: make(chan struct{}, 1)}
		vp.proc = framework.StartCommandInWatched(parent, ns, w.line, kubeProxy, "--kubeconfig", api.KubeconfigOf("proxy"),
			"--proxy-mode", "nftables", "--hostname-override", "node-a", "--cluster-cidr", "10.244.0.0/16",
			"--conntrack-max-per-core", "0", "--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256", "-v", "4")
		deadline := time.Now().Add(20 * time.Minute)
		for {
			w.mu.Lock()
			done := len(w.full) > 0
			if done {
				vp.fullSync, vp.ready = w.full[0], w.fullDone[0].Sub(start)
			}
			w.mu.Unlock()
			if done {
				break
			}
			if vp.proc.Exited() || time.Now().After(deadline) {
				parent.Fatalf("kube-proxy made no full sync:\n%s", vp.proc.Logs())
			}
			time.Sleep(50 * time.Millisecond)
		}
		vp.programmed = func(tb testing.TB, k int, start time.Time) (time.Time, bool) {
			at := w.waitFor(tb, fmt.Sprintf("default/svc-%d", k), start, time.Minute)
			w.mu.Lock()
			defer w.mu.Unlock()
			// A full sync that ended after the write may have taken it.
			return at, !slices.ContainsFunc(w.fullDone, func(t time.Time) bool { return t.After(start) })
		}
		return vp
	}
	watch := &syncWatcher{notify: make(chan struct{}, 1)}
	args := []string{"proxy", "--kubeconfig", api.KubeconfigOf("proxy"),
		"--proxy-mode", "nftables", "--hostname-override", "node-a", "--cluster-cidr", "10.244.0.0/16",
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256"}
	if who == "svcnet-ebpf" {
		args[4] = "ebpf"
		args = append(args, "--ebpf-cgroup", framework.NewCgroup(parent, "versus"))
	}
	if who == "svcnet-ebpf" {
		vp.proc = framework.StartProcessInNetnsOnly(parent, ns, watch.line, args...)
	} else {
		vp.proc = framework.StartProcessInWatched(parent, ns, watch.line, args...)
	}
	watch.exited = func() bool {
		if vp.proc.Exited() {
			time.Sleep(200 * time.Millisecond) // its last words, still in the pipe
			parent.Logf("%s:\n%s", who, vp.proc.Logs())
			return true
		}
		return false
	}
	ev, seen := watch.wait(parent, 0, "", 20*time.Minute)
	vp.fullSync, vp.ready = ev.took, ev.at.Sub(start)
	var mu sync.Mutex
	vp.programmed = func(tb testing.TB, k int, _ time.Time) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		ev, next := watch.wait(tb, seen, fmt.Sprintf("default/svc-%d:http/tcp", k), time.Minute)
		seen = next
		return ev.at, !ev.full
	}
	return vp
}
