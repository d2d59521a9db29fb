package iptables_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/iptables/iptablestest"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/iptables"
	"github.com/svcnet/svcnet/internal/proxy/proxytest"
	"github.com/svcnet/svcnet/internal/proxy/trace"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// watchedFake checks the kernel after every restore, as packets would
// see it between the restores of a split sync.
type watchedFake struct {
	*iptablestest.Fake
	after func()
}

func (w *watchedFake) Restore(ctx context.Context, data []byte) error {
	err := w.Fake.Restore(ctx, data)
	if err == nil && w.after != nil {
		w.after()
	}
	return err
}

// TestSplitSyncsStayCoherent splits every sync into restores of a few
// chains and checks, after each restore, that every service is either
// as before or as after the sync: its outcomes add up to 1 and either
// all DNAT to endpoints or none does.
func TestSplitSyncsStayCoherent(t *testing.T) {
	for _, edit := range []bool{false, true} {
		t.Run(fmt.Sprintf("edit=%v", edit), func(t *testing.T) {
			fake := &watchedFake{Fake: iptablestest.NewFake()}
			w := &world{t: t, fake: fake.Fake, metrics: proxy.NewMetrics(nil), now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			w.tracker = svcstate.NewTracker(svcstate.Config{NodeName: "node-a", Logger: quiet, Now: func() time.Time { return w.now }})
			p, err := iptables.NewProxier(iptables.ProxierConfig{
				Sync:                proxy.SyncerConfig{Tracker: w.tracker, Metrics: w.metrics, Logger: quiet, Now: func() time.Time { return w.now }},
				Rules:               nodeConfig,
				Executor:            fake,
				EditTopLevelChains:  edit,
				MaxChainsPerRestore: 10,
			})
			if err != nil {
				t.Fatal(err)
			}
			w.proxier = p
			const n = 30
			restores := 0
			fake.after = func() {
				restores++
				rs := kernel(t, fake.Fake)
				for i := range n {
					pkt := trace.Packet{Src: podOnNode, Dst: netip.MustParseAddrPort(fmt.Sprintf("10.96.1.%d:80", i)), Proto: "tcp"}
					res := trace.Trace(rs, pkt, env)
					sum, dnat := 0.0, 0
					for _, o := range res.Outcomes() {
						sum += o.Probability
						if o.DNAT {
							dnat++
						}
					}
					if math.Abs(sum-1) > 1e-6 || (dnat != 0 && dnat != len(res.Outcomes())) || len(res.Warnings) > 0 {
						t.Errorf("after restore %d, web-%d is half-programmed: %+v %v", restores, i, res.Outcomes(), res.Warnings)
					}
				}
			}

			w.addWeb(n) // 30 ports × 5 chains (EXT, SVC, 3 SEP)
			w.sync()
			if restores < 15 {
				t.Errorf("first sync took %d restores, want one per two ports and more", restores)
			}
			w.assertMatchesFullSync()

			// Many changes at once: one endpoint less here, twenty
			// services gone (100 stale chains), a new one.
			restores = 0
			w.tracker.OnEndpointSliceUpdate(nil, proxytest.WebSlice(7, 3, false))
			for i := 10; i < n; i++ {
				w.tracker.OnServiceDelete(proxytest.WebService(i))
			}
			w.tracker.OnServiceAdd(proxytest.WebService(40))
			w.tracker.OnEndpointSliceAdd(proxytest.WebSlice(40, 3, true))
			w.sync()
			if restores < 10 {
				t.Errorf("big partial sync took %d restores", restores)
			}
			w.assertMatchesFullSync()

			// A small change is one restore, as without splitting.
			restores = 0
			w.tracker.OnEndpointSliceUpdate(nil, proxytest.WebSlice(7, 3, true))
			w.sync()
			if restores != 1 {
				t.Errorf("small change took %d restores", restores)
			}
			w.assertMatchesFullSync()
		})
	}
}
