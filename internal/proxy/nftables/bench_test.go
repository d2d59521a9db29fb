package nftables_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/proxy/nftables"
	"github.com/svcnet/svcnet/internal/proxy/proxytest"
	"github.com/svcnet/svcnet/internal/svcstate"
	st "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

// benchTracker holds n ClusterIP services with ten endpoints each.
func benchTracker(n int) *svcstate.Tracker {
	tr := proxytest.QuietTracker()
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		tr.OnServiceAdd(st.Service("default", name, fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), st.Port("http", tcp, 80, 0)))
		opts := []st.SliceOption{st.SlicePort("http", tcp, 8080)}
		for j := range 10 {
			opts = append(opts, st.Endpoint(fmt.Sprintf("10.%d.%d.%d", 128+j, i/250, i%250+1), "node-b"))
		}
		tr.OnEndpointSliceAdd(st.Slice("default", name, name+"-1", opts...))
	}
	return tr
}

// BenchmarkSync times the parts of a full sync and of a one-endpoint
// change in a network namespace: building the plan, encoding the
// transaction, and the kernel applying it.
//
//	go test ./internal/proxy/nftables -run '^$' -bench Sync -benchtime 20x
func BenchmarkSync(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			tr := benchTracker(n)
			snap, _ := tr.Snapshot()
			ns := fmt.Sprintf("svcnet-bench-nft-%d", rand.IntN(1e9))
			if err := netns.Create(ns); err != nil {
				b.Fatal(err)
			}
			defer netns.Delete(ns)
			var k *nftables.Kernel
			if err := netns.Do(ns, func() (err error) { k, err = nftables.OpenKernel(v1.IPv4Protocol); return }); err != nil {
				b.Fatal(err)
			}
			defer k.Close()
			cfg := configOf(proxytest.Node)
			t0 := time.Now()
			plan := nftables.Build(cfg, nftables.Input{Snapshot: snap, Full: true, Fresh: true})
			t1 := time.Now()
			txs := plan.FreshTxs(plan.Table.Family)
			t2 := time.Now()
			messages, size := 0, 0
			for _, tx := range txs {
				if err := k.Conn.Run(tx); err != nil {
					b.Fatal(err)
				}
				messages, size = messages+tx.Len(), size+tx.Bytes()
			}
			t3 := time.Now()
			b.Logf("full sync of %d services: build %s, encode %s (%d transactions, %d messages, %d MiB), kernel %s",
				n, t1.Sub(t0), t2.Sub(t1), len(txs), messages, size>>20, t3.Sub(t2))
			state := plan.State
			var build, encode, kernel time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				svc := rand.IntN(n)
				name := fmt.Sprintf("svc-%d", svc)
				opts := []st.SliceOption{st.SlicePort("http", tcp, 8080)}
				for j := range 10 {
					var eo []st.EndpointOption
					if j == 0 && i%2 == 0 {
						eo = append(eo, st.NotReady())
					}
					opts = append(opts, st.Endpoint(fmt.Sprintf("10.%d.%d.%d", 128+j, svc/250, svc%250+1), "node-b", eo...))
				}
				tr.OnEndpointSliceAdd(st.Slice("default", name, name+"-1", opts...))
				snap, ch := tr.Snapshot()
				t0 := time.Now()
				p := nftables.Build(cfg, nftables.Input{Snapshot: snap, Changed: ch.Ports, Previous: state})
				t1 := time.Now()
				tx := p.Tx(plan.Table.Family)
				t2 := time.Now()
				if err := k.Conn.Run(tx); err != nil {
					b.Fatal(err)
				}
				t3 := time.Now()
				build += t1.Sub(t0)
				encode += t2.Sub(t1)
				kernel += t3.Sub(t2)
				state = p.State
			}
			b.ReportMetric(float64(build.Microseconds())/float64(b.N), "build-µs/op")
			b.ReportMetric(float64(encode.Microseconds())/float64(b.N), "encode-µs/op")
			b.ReportMetric(float64(kernel.Microseconds())/float64(b.N), "kernel-µs/op")
		})
	}
}
