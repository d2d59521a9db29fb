package apiserver_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

// The scale of the reference kube-apiserver measurement (docs/benchmarks.md).
const (
	benchServices = 10000
	benchWatchers = 100
)

// BenchmarkAPIServer10kServices measures a server holding 10,000 Services:
// watch latency to 100 watchers and list time. Run it with
//
//	go test ./test/e2e/apiserver -run - -bench APIServer10k -benchtime 50x
func BenchmarkAPIServer10kServices(b *testing.B) {
	s := framework.StartAPIServer(b)
	b.Logf("created %d services in %s", benchServices, createServices(b, []*framework.APIServer{s}, benchServices))
	b.Run("WatchLatency", func(b *testing.B) {
		w := watchLatency(b, []*framework.APIServer{s}, benchServices)
		framework.ReportLatencies(b, "all-watchers", w.all)
		framework.ReportLatencies(b, "write", w.writes)
	})
	b.Run("List", func(b *testing.B) { benchList(b, s) })
}

// createServices creates n ClusterIP services, 64 at a time, the clients
// spread over the servers, and returns how long it took.
func createServices(b *testing.B, servers []*framework.APIServer, n int) time.Duration {
	ctx := context.Background()
	start := time.Now()
	work := make(chan int)
	var wg sync.WaitGroup
	for w := range 64 {
		c := servers[w%len(servers)].Client()
		wg.Go(func() {
			for i := range work {
				svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%05d", i)},
					Spec: corev1.ServiceSpec{Selector: map[string]string{"app": fmt.Sprint(i)},
						Ports: []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "https", Port: 443}}}}
				if _, err := c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return time.Since(start)
}

// separateClient has a connection of its own, like a separate process.
func separateClient(b *testing.B, s *framework.APIServer) kubernetes.Interface {
	cfg := rest.CopyConfig(s.Config("admin"))
	cfg.Dial = (&net.Dialer{}).DialContext // not shared with other clients
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// latencies are watchLatency's measures, one per write.
type latencies struct {
	// all: until every watcher has the event; local: every watcher of
	// the server that took the write; remote: of the others (none with
	// one server); writes: the write itself.
	all, local, remote, writes []time.Duration
}

// watchLatency opens 100 watchers spread over the servers, then patches
// one of the first `services` Services b.N times, each write sent to the
// next server in turn, and times each write until every watcher has its
// event; -benchtime=50x gives the reference's 50 writes.
func watchLatency(b *testing.B, servers []*framework.APIServer, services int) latencies {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type seen struct {
		rv     string
		at     time.Time
		server int
	}
	n := len(servers)
	events := make(chan seen, benchWatchers*64)
	list, err := servers[0].Client().CoreV1().Services("default").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	for i := range benchWatchers {
		w, err := separateClient(b, servers[i%n]).CoreV1().Services("").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				if ev.Type == watch.Modified {
					events <- seen{ev.Object.(*corev1.Service).ResourceVersion, time.Now(), i % n}
				}
			}
		}()
	}
	var out latencies
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// A value never written before: a no-op patch makes no event.
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{"bench":"%d"}}}`, time.Now().UnixNano())
		start := time.Now()
		svc, err := servers[i%n].Client().CoreV1().Services("default").Patch(ctx, fmt.Sprintf("svc-%05d", i%services),
			types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			b.Fatal(err)
		}
		out.writes = append(out.writes, time.Since(start))
		got := 0
		var last, lastLocal, lastRemote time.Time
		timeout := time.After(10 * time.Second)
		for got < benchWatchers {
			select {
			case ev := <-events:
				if ev.rv != svc.ResourceVersion {
					continue
				}
				got++
				last = ev.at
				if ev.server == i%n {
					lastLocal = ev.at
				} else {
					lastRemote = ev.at
				}
			case <-timeout:
				b.Fatalf("write %d: %d of %d watchers saw it in 10s", i, got, benchWatchers)
			}
		}
		out.all = append(out.all, last.Sub(start))
		out.local = append(out.local, lastLocal.Sub(start))
		if n > 1 {
			out.remote = append(out.remote, lastRemote.Sub(start))
		}
	}
	b.StopTimer()
	return out
}

// benchList lists every service, as a consistent read (what informers and
// kubectl ask for) and from the watch cache (resourceVersion 0), in
// protobuf and JSON.
func benchList(b *testing.B, s *framework.APIServer) {
	for _, ct := range []string{"protobuf", "json"} {
		for _, rv := range []string{"", "0"} {
			b.Run(fmt.Sprintf("%s/rv=%q", ct, rv), func(b *testing.B) {
				cfg := rest.CopyConfig(s.Config("admin"))
				cfg.ContentType = "application/vnd.kubernetes." + ct
				if ct == "json" {
					cfg.ContentType = "application/json"
				}
				cfg.AcceptContentTypes = cfg.ContentType
				c, err := kubernetes.NewForConfig(cfg)
				if err != nil {
					b.Fatal(err)
				}
				var times []time.Duration
				for i := 0; i < b.N; i++ {
					start := time.Now()
					l, err := c.CoreV1().Services("").List(context.Background(), metav1.ListOptions{ResourceVersion: rv})
					if err != nil {
						b.Fatal(err)
					}
					times = append(times, time.Since(start))
					if len(l.Items) < benchServices {
						b.Fatalf("listed %d services", len(l.Items))
					}
				}
				framework.ReportLatencies(b, "list", times)
			})
		}
	}
}
