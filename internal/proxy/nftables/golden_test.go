package nftables_test

import (
	"path/filepath"
	"testing"

	nft "github.com/svcnet/svcnet/internal/nftables"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/nftables"
	"github.com/svcnet/svcnet/internal/proxy/proxytest"
)

func configOf(n proxy.NodeConfig) nftables.Config {
	return nftables.Config{NodeConfig: n}
}

// TestGolden builds the table for each kube-proxy case, compares it with
// its golden file, and traces every check's packet through it.
func TestGolden(t *testing.T) {
	for _, fx := range proxytest.Fixtures {
		t.Run(fx.Name, func(t *testing.T) {
			node, env := fx.Node()
			cfg := configOf(node)
			plan := nftables.Build(cfg, nftables.Input{Snapshot: proxytest.Snapshot(fx.Objects), Full: true})
			proxytest.CompareGolden(t, filepath.Join("testdata", fx.Name+".golden"), []byte(plan.Format(plan.Table.Family)))
			for _, c := range fx.Checks {
				t.Run(c.Name, func(t *testing.T) {
					recent := map[string]bool{}
					for _, s := range c.Affinity {
						recent[nftables.PrefixAffinity+nftables.EndpointBase(s.Port, s.Endpoint)] = true
					}
					want := c.Want
					if c.WantNFT != nil {
						want = c.WantNFT
					}
					proxytest.CheckOutcomes(t, nftables.Trace(nftables.TableSource(plan.Table, recent), c.Pkt, env), want)
				})
			}
		})
	}
}

var _ = nft.IPv4
