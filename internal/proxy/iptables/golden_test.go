package iptables_test

import (
	"context"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/iptables/iptablestest"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/iptables"
	"github.com/svcnet/svcnet/internal/proxy/proxytest"
	"github.com/svcnet/svcnet/internal/proxy/trace"
)

// The kube-proxy cases and node-a, shared with the other modes.
var (
	fixtures     = proxytest.Fixtures
	nodeConfig   = configOf(proxytest.Node)
	env          = proxytest.Env
	nodeIP       = proxytest.NodeIP
	podOnNode    = proxytest.PodOnNode
	outsider     = proxytest.Outsider
	quietTracker = proxytest.QuietTracker
	feed         = proxytest.Feed
	tcp          = v1.ProtocolTCP
	lineDiff     = proxytest.LineDiff
)

func configOf(n proxy.NodeConfig) iptables.Config {
	return iptables.Config{NodeConfig: n}
}

// apply ensures the jump rules and restores data into f, as a full sync
// of the proxier does.
func apply(t *testing.T, f *iptablestest.Fake, cfg iptables.Config, data []byte) {
	t.Helper()
	ctx := context.Background()
	for _, table := range []string{"mangle", "nat", "filter"} {
		if err := f.EnsureChain(ctx, table, iptables.ChainCanary); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range iptables.JumpRules(cfg) {
		if err := f.EnsureChain(ctx, j.Table, j.Target); err != nil {
			t.Fatal(err)
		}
		if err := f.EnsureRule(ctx, j.Table, j.Chain, j.Args()...); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Restore(ctx, data); err != nil {
		t.Fatalf("restore: %v\n%s", err, data)
	}
}

// kernel returns what the fake kernel holds, parsed by the tracer.
func kernel(t *testing.T, f *iptablestest.Fake) *trace.Ruleset {
	t.Helper()
	var all []byte
	for _, table := range []string{"filter", "nat"} {
		b, err := f.Save(context.Background(), table)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	rs, err := trace.Parse(all)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, all)
	}
	return rs
}

func TestGolden(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.Name, func(t *testing.T) {
			node, traceEnv := fx.Node()
			cfg := configOf(node)
			tr := quietTracker()
			feed(tr, fx.Objects)
			snap, _ := tr.Snapshot()
			rs := iptables.Build(cfg, iptables.Input{Snapshot: snap, Full: true})
			proxytest.CompareGolden(t, filepath.Join("testdata", fx.Name+".golden"), rs.Data)

			fake := iptablestest.NewFake()
			apply(t, fake, cfg, rs.Data)
			rules := kernel(t, fake)
			for _, c := range fx.Checks {
				t.Run(c.Name, func(t *testing.T) {
					e := traceEnv
					e.Recent = map[string]bool{}
					for _, s := range c.Affinity {
						e.Recent[iptables.EndpointChain(s.Port, s.Endpoint)] = true
					}
					proxytest.CheckOutcomes(t, trace.Trace(rules, c.Pkt, e), c.Want)
				})
			}
		})
	}
}
