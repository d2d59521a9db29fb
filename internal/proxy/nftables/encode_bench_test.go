package nftables_test

import (
	"testing"

	"github.com/svcnet/svcnet/internal/proxy/nftables"
	"github.com/svcnet/svcnet/internal/proxy/proxytest"
)

// BenchmarkFullPlan builds and encodes the full sync of 10,000 services
// with 10 endpoints each, without a kernel.
func BenchmarkFullPlan(b *testing.B) {
	tr := benchTracker(10000)
	snap, _ := tr.Snapshot()
	cfg := configOf(proxytest.Node)
	b.Run("build", func(b *testing.B) {
		for range b.N {
			nftables.Build(cfg, nftables.Input{Snapshot: snap, Full: true})
		}
	})
	plan := nftables.Build(cfg, nftables.Input{Snapshot: snap, Full: true})
	b.Run("encode", func(b *testing.B) {
		for range b.N {
			plan.Tx(plan.Table.Family)
		}
	})
}
