package ebpf_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/svcnet/svcnet/internal/bpflb"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/ebpf"
	"github.com/svcnet/svcnet/internal/proxy/proxytest"
	"github.com/svcnet/svcnet/internal/svcstate"
	st "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

// benchSlice is service i's slice: ten endpoints on other nodes, the
// first one unready when flip.
func benchSlice(i int, flip bool) *discovery.EndpointSlice {
	name := fmt.Sprintf("svc-%d", i)
	opts := []st.SliceOption{st.SlicePort("http", v1.ProtocolTCP, 8080)}
	for j := range 10 {
		var eo []st.EndpointOption
		if j == 0 && flip {
			eo = append(eo, st.NotReady())
		}
		opts = append(opts, st.Endpoint(fmt.Sprintf("10.%d.%d.%d", 128+j, i/250%256, i%250+1), "node-b", eo...))
	}
	return st.Slice("default", name, name+"-1", opts...)
}

// BenchmarkSync times, in the kernel's maps, the first full sync of n
// ClusterIP Services with ten endpoints each, and then one endpoint
// change at a time: the sync that writes it, as the proxy runs it after
// the tracker has the change (p50 and p99 over b.N changes).
//
//	go test ./internal/proxy/ebpf -run '^$' -bench Sync -benchtime 2000x
//
// SVCNET_BENCH_SERVICES=N runs N Services only.
func BenchmarkSync(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			lb, err := bpflb.Load(bpflb.Sizes{Services: 1 << 20, IDs: 1 << 18, Backends: 1 << 21, Sockets: 1024, Affinities: 1024,
				Flows: 1024, Ranges: 1024}, bpflb.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer lb.Close()
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			tr := svcstate.NewTracker(svcstate.Config{NodeName: "node-a", Logger: quiet})
			for i := range n {
				tr.OnServiceAdd(st.Service("default", fmt.Sprintf("svc-%d", i), fmt.Sprintf("10.%d.%d.%d", 96+i/62500, i/250%250, i%250+1),
					st.Port("http", v1.ProtocolTCP, 80, 0)))
				tr.OnEndpointSliceAdd(benchSlice(i, false))
			}
			k := ebpf.NewKernel(lb, nil)
			k.Fresh = true
			p, err := ebpf.NewProxier(ebpf.ProxierConfig{Rules: ebpf.Config{NodeConfig: proxytest.Node},
				Sync: proxy.SyncerConfig{Tracker: tr, Logger: quiet}, Kernel: k})
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if err := p.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
			full := time.Since(t0)
			p.RequestFullSync()
			t0 = time.Now()
			if err := p.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.Logf("%d services: first full sync %s, a full sync over it %s", n, full, time.Since(t0))
			took := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				svc := rand.IntN(n)
				tr.OnEndpointSliceUpdate(nil, benchSlice(svc, i%2 == 0))
				t0 := time.Now()
				if err := p.Sync(context.Background()); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// benchSizes are the numbers of Services BenchmarkSync runs with:
// SVCNET_BENCH_SERVICES picks one.
func benchSizes() []int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("SVCNET_BENCH_SERVICES"), &n); err == nil && n > 0 {
		return []int{n}
	}
	return []int{10000, 100000}
}
