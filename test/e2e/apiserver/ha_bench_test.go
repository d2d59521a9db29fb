package apiserver_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/internal/etcd"
	"github.com/svcnet/svcnet/internal/pki"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// BenchmarkControlPlanes compares one API server with three on the same
// etcd: Service creation throughput (64 clients, spread over the
// servers) and watch latency (100 watchers spread over the servers, the
// writes too). Run it with
//
//	go test ./test/e2e/apiserver -run - -bench ControlPlanes -benchtime 50x
func BenchmarkControlPlanes(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("servers=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			files, err := pki.EnsureEtcd(filepath.Join(dir, "pki"))
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			member, err := etcd.Start(ctx, filepath.Join(dir, "etcd"), etcd.TLS{CA: files.CA, ServerCert: files.ServerCert,
				ServerKey: files.ServerKey, PeerCert: files.PeerCert, PeerKey: files.PeerKey})
			if err != nil {
				b.Fatal(err)
			}
			defer member.Close()
			var servers []*framework.APIServer
			for range n {
				servers = append(servers, framework.StartAPIServer(b, "--etcd-servers", member.Endpoints[0],
					"--etcd-cafile", files.CA, "--etcd-certfile", files.ClientCert, "--etcd-keyfile", files.ClientKey))
			}
			const services = 3000
			start := time.Now()
			work := make(chan int)
			var wg sync.WaitGroup
			for w := range 64 {
				c := servers[w%n].Client()
				wg.Go(func() {
					for i := range work {
						svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%05d", i)},
							Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
						if _, err := c.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
							b.Error(err)
						}
					}
				})
			}
			for i := range services {
				work <- i
			}
			close(work)
			wg.Wait()
			createRate := float64(services) / time.Since(start).Seconds()

			type seen struct {
				rv     string
				at     time.Time
				server int
			}
			events := make(chan seen, benchWatchers*64)
			list, err := servers[0].Client().CoreV1().Services("default").List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				b.Fatal(err)
			}
			for i := range benchWatchers {
				cfg := rest.CopyConfig(servers[i%n].Config("admin"))
				cfg.Dial = (&net.Dialer{}).DialContext
				w, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Services("").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
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
			// all: until every watcher has the event; local: every watcher
			// of the server that took the write; remote: of the others.
			var all, local, remote []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				patch := fmt.Appendf(nil, `{"metadata":{"labels":{"bench":"%d"}}}`, time.Now().UnixNano())
				t0 := time.Now()
				svc, err := servers[i%n].Client().CoreV1().Services("default").Patch(ctx, fmt.Sprintf("svc-%05d", i%services),
					types.StrategicMergePatchType, patch, metav1.PatchOptions{})
				if err != nil {
					b.Fatal(err)
				}
				got, last := 0, time.Time{}
				var lastLocal, lastRemote time.Time
				timeout := time.After(10 * time.Second)
				for got < benchWatchers {
					select {
					case ev := <-events:
						if ev.rv == svc.ResourceVersion {
							got++
							last = ev.at
							if ev.server == i%n {
								lastLocal = ev.at
							} else {
								lastRemote = ev.at
							}
						}
					case <-timeout:
						b.Fatalf("write %d: %d of %d watchers saw it in 10s", i, got, benchWatchers)
					}
				}
				all = append(all, last.Sub(t0))
				local = append(local, lastLocal.Sub(t0))
				if n > 1 {
					remote = append(remote, lastRemote.Sub(t0))
				}
			}
			b.StopTimer()
			b.ReportMetric(createRate, "creates/s")
			report(b, "all-watchers", all)
			report(b, "local-watchers", local)
			if n > 1 {
				report(b, "remote-watchers", remote)
			}
		})
	}
}
