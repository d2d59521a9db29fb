package apiserver_test

import (
	"fmt"
	"testing"

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
			store := framework.StartEtcd(b)
			var servers []*framework.APIServer
			for range n {
				servers = append(servers, framework.StartAPIServer(b, store.APIServerArgs()...))
			}
			const services = 3000
			took := createServices(b, servers, services)
			w := watchLatency(b, servers, services)
			b.ReportMetric(float64(services)/took.Seconds(), "creates/s")
			framework.ReportLatencies(b, "all-watchers", w.all)
			framework.ReportLatencies(b, "local-watchers", w.local)
			if n > 1 {
				framework.ReportLatencies(b, "remote-watchers", w.remote)
			}
		})
	}
}
