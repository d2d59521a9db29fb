package iptables_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/iptables/iptablestest"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/iptables"
	"github.com/svcnet/svcnet/internal/proxy/proxytest"
	"github.com/svcnet/svcnet/internal/proxy/trace"
	"github.com/svcnet/svcnet/internal/svcstate"
	. "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

// world is a tracker and a proxier on a fake kernel.
type world struct {
	t       *testing.T
	tracker *svcstate.Tracker
	fake    *iptablestest.Fake
	proxier *iptables.Proxier
	metrics *proxy.Metrics
	now     time.Time
	foreign []string // nat chains that are not ours
}

func newWorld(t *testing.T) *world { return newEditingWorld(t, false) }

func newEditingWorld(t *testing.T, edit bool) *world {
	w := &world{t: t, fake: iptablestest.NewFake(), metrics: proxy.NewMetrics(nil),
		now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	w.tracker = svcstate.NewTracker(svcstate.Config{NodeName: "node-a",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return w.now }})
	p, err := iptables.NewProxier(iptables.ProxierConfig{
		Sync:               proxy.SyncerConfig{Tracker: w.tracker, Metrics: w.metrics, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return w.now }},
		Rules:              nodeConfig,
		Executor:           w.fake,
		EditTopLevelChains: edit,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.proxier = p
	return w
}

func (w *world) sync() {
	w.t.Helper()
	w.now = w.now.Add(time.Second)
	if err := w.proxier.Sync(context.Background()); err != nil {
		w.t.Fatalf("sync: %v", err)
	}
}

func (w *world) lastRestore() string { return string(w.fake.Restores[len(w.fake.Restores)-1]) }

func (w *world) addWeb(n int) {
	for i := range n {
		w.tracker.OnServiceAdd(proxytest.WebService(i))
		w.tracker.OnEndpointSliceAdd(proxytest.WebSlice(i, 3, true))
	}
}

// save returns the fake kernel's tables.
func save(t *testing.T, f *iptablestest.Fake) string {
	t.Helper()
	var b bytes.Buffer
	for _, table := range []string{"filter", "nat"} {
		data, err := f.Save(context.Background(), table)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// assertMatchesFullSync checks that the kernel holds exactly what a full
// sync of the current snapshot on a fresh kernel would produce.
func (w *world) assertMatchesFullSync() {
	w.t.Helper()
	fresh := iptablestest.NewFake()
	for _, c := range w.foreign {
		if err := fresh.EnsureChain(context.Background(), "nat", c); err != nil {
			w.t.Fatal(err)
		}
	}
	rs := iptables.Build(nodeConfig, iptables.Input{Snapshot: w.tracker.Current(), Full: true})
	apply(w.t, fresh, nodeConfig, rs.Data)
	if got, want := canonical(w.t, save(w.t, w.fake)), canonical(w.t, save(w.t, fresh)); got != want {
		w.t.Errorf("kernel differs from a full sync:\n%s", lineDiff(want, got))
	}
}

// topLevel are the chains whose rule order carries no meaning, except
// that the node-port jump must end KUBE-SERVICES.
var topLevel = map[string]bool{
	"KUBE-SERVICES": true, "KUBE-NODEPORTS": true, "KUBE-EXTERNAL-SERVICES": true, "KUBE-PROXY-FIREWALL": true,
}

// canonical sorts the rules of the top-level chains of iptables-save
// output, after checking that the node-port jump is last in nat
// KUBE-SERVICES.
func canonical(t *testing.T, save string) string {
	t.Helper()
	var out, group []string
	flush := func() {
		slices.Sort(group)
		out = append(out, group...)
		group = nil
	}
	table, lastServices := "", ""
	for _, l := range strings.Split(save, "\n") {
		if strings.HasPrefix(l, "*") {
			flush()
			table = l
		}
		chain := ""
		if strings.HasPrefix(l, "-A ") {
			chain, _, _ = strings.Cut(l[3:], " ")
		}
		if table == "*nat" && chain == "KUBE-SERVICES" {
			lastServices = l
		}
		if topLevel[chain] {
			group = append(group, l)
			continue
		}
		flush()
		out = append(out, l)
	}
	if !strings.Contains(lastServices, "kubernetes service nodeports") {
		t.Errorf("last nat KUBE-SERVICES rule is %q", lastServices)
	}
	return strings.Join(out, "\n")
}

func nn(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

func count(s, sub string) int { return strings.Count(s, sub) }

func TestPartialSyncWritesOnlyWhatChanged(t *testing.T) {
	for _, edit := range []bool{false, true} {
		t.Run(fmt.Sprintf("edit=%v", edit), func(t *testing.T) { testPartialSync(t, edit) })
	}
}

func testPartialSync(t *testing.T, edit bool) {
	w := newEditingWorld(t, edit)
	w.addWeb(50)
	w.sync()
	first := w.lastRestore()
	if count(first, ":KUBE-SVC-") != 50 || count(first, ":KUBE-SEP-") != 150 {
		t.Fatalf("first sync is not full:\n%s", first)
	}
	w.assertMatchesFullSync()

	// One endpoint of one service stops being ready.
	w.tracker.OnEndpointSliceUpdate(nil, proxytest.WebSlice(7, 3, false))
	w.sync()
	partial := w.lastRestore()
	if n := count(partial, ":KUBE-SVC-"); n != 1 {
		t.Errorf("partial sync declares %d service chains, want 1:\n%s", n, partial)
	}
	// The endpoints that remain keep their chains untouched; the one that
	// left is flushed and deleted.
	if count(partial, ":KUBE-SEP-") != 1 || count(partial, "\n-X KUBE-SEP-") != 1 {
		t.Errorf("partial sync endpoint chains wrong:\n%s", partial)
	}
	if !edit {
		// The top-level chains are complete in every restore.
		if count(partial, "-A KUBE-SERVICES ") != 51 || count(partial, "-A KUBE-NODEPORTS ") != 50 {
			t.Errorf("top-level chains incomplete:\n%s", partial)
		}
		if len(partial) > len(first)/3 {
			t.Errorf("partial restore is %d bytes, full was %d", len(partial), len(first))
		}
	} else if count(partial, "KUBE-SERVICES") != 0 || len(partial) > 2000 {
		// Only the service's own chains: its top-level rules did not change.
		t.Errorf("editing restore touches the top level or is large (%d bytes):\n%s", len(partial), partial)
	}
	w.assertMatchesFullSync()

	// The endpoint comes back.
	w.tracker.OnEndpointSliceUpdate(nil, proxytest.WebSlice(7, 3, true))
	w.sync()
	w.assertMatchesFullSync()

	// A service goes away: its chains go with it.
	w.tracker.OnServiceDelete(proxytest.WebService(3))
	w.sync()
	if n := count(w.lastRestore(), "\n-X "); n != 5 { // SVC, EXT, 3 SEP
		t.Errorf("deleted %d chains, want 5:\n%s", n, w.lastRestore())
	}
	if edit && (count(w.lastRestore(), "\n-D KUBE-SERVICES ") != 1 || count(w.lastRestore(), "\n-D KUBE-NODEPORTS ") != 1) {
		t.Errorf("editing restore does not delete the top-level rules:\n%s", w.lastRestore())
	}
	w.assertMatchesFullSync()

	// A service loses all its endpoints: REJECT in filter, chains gone.
	w.tracker.OnEndpointSliceDelete(proxytest.WebSlice(4, 3, true))
	w.sync()
	if !strings.Contains(w.lastRestore(), `"default/web-4:http has no endpoints"`) {
		t.Errorf("no REJECT rule:\n%s", w.lastRestore())
	}
	w.assertMatchesFullSync()

	// A new service, and one whose cluster IP rules change.
	w.tracker.OnServiceAdd(proxytest.WebService(60))
	w.tracker.OnEndpointSliceAdd(proxytest.WebSlice(60, 2, true))
	w.tracker.OnServiceUpdate(nil, Service("default", "web-5", "10.96.1.5", Port("http", tcp, 8080, 31005),
		Type(v1.ServiceTypeNodePort), ExternalIPs("203.0.113.5")))
	w.sync()
	w.assertMatchesFullSync()
	res := trace.Trace(kernel(t, w.fake), trace.Packet{Src: outsider, Dst: netip.MustParseAddrPort("203.0.113.5:8080"), Proto: "tcp"}, env)
	if o := res.Outcomes(); len(o) != 3 || !o[0].DNAT {
		t.Errorf("external IP after update: %+v", o)
	}
}

func TestEditingSyncFailsOverToFull(t *testing.T) {
	w := newEditingWorld(t, true)
	w.addWeb(3)
	w.sync()
	// Someone flushes KUBE-SERVICES: the next edit's -D cannot find its
	// rule, the restore fails as a whole, and the retry is full.
	w.fake.Flush("nat", "KUBE-SERVICES")
	w.tracker.OnServiceDelete(proxytest.WebService(1))
	w.now = w.now.Add(time.Second)
	if err := w.proxier.Sync(context.Background()); err == nil {
		t.Fatal("edit of a flushed chain succeeded")
	}
	w.sync()
	w.assertMatchesFullSync()
}

func TestNothingChangedNoRestore(t *testing.T) {
	w := newWorld(t)
	w.addWeb(3)
	w.sync()
	n := len(w.fake.Restores)
	// An identical rewrite of a slice is an event but not a change.
	s := proxytest.WebSlice(1, 3, true)
	s.ResourceVersion = "2"
	w.tracker.OnEndpointSliceUpdate(nil, s)
	w.sync()
	w.sync()
	if len(w.fake.Restores) != n {
		t.Errorf("%d restores without changes", len(w.fake.Restores)-n)
	}
	if w.proxier.LastSuccess() != w.now {
		t.Error("a sync with nothing to do still counts as success")
	}
}

func TestFailedSyncIsRetriedInFull(t *testing.T) {
	w := newWorld(t)
	w.addWeb(5)
	w.sync()
	w.fake.FailRestore = func([]byte) error { return errors.New("iptables-restore: line 7 failed") }
	w.tracker.OnEndpointSliceUpdate(nil, proxytest.WebSlice(2, 3, false))
	w.now = w.now.Add(time.Second)
	if err := w.proxier.Sync(context.Background()); err == nil {
		t.Fatal("sync succeeded")
	}
	if got := counterValue(t, w.metrics.PartialRestoreFailures); got != 1 {
		t.Errorf("partial restore failures = %v", got)
	}
	w.fake.FailRestore = nil
	w.sync()
	if count(w.lastRestore(), ":KUBE-SVC-") != 5 {
		t.Errorf("retry after failure is not full:\n%s", w.lastRestore())
	}
	w.assertMatchesFullSync()
}

func TestFullSyncRepairsAndCleansUp(t *testing.T) {
	w := newWorld(t)
	w.addWeb(2)
	// A chain left by an earlier run, and a foreign one that is not ours.
	ctx := context.Background()
	for _, c := range []string{"KUBE-SEP-LEFTOVERFROMOLDRUN", "DOCKER"} {
		if err := w.fake.EnsureChain(ctx, "nat", c); err != nil {
			t.Fatal(err)
		}
	}
	w.foreign = []string{"DOCKER"}
	w.sync()
	chains := strings.Join(w.fake.Chains("nat"), " ")
	if strings.Contains(chains, "LEFTOVER") || !strings.Contains(chains, "DOCKER") {
		t.Errorf("chains after first sync: %s", chains)
	}

	// Someone flushes a service chain; the periodic full sync repairs it.
	web0 := svcstate.ServicePortName{NamespacedName: nn("default", "web-0"), Port: "http", Protocol: tcp}
	w.fake.Flush("nat", iptables.ChainsFor(web0).Cluster)
	pkt := trace.Packet{Src: podOnNode, Dst: netip.MustParseAddrPort("10.96.1.0:80"), Proto: "tcp"}
	if res := trace.Trace(kernel(t, w.fake), pkt, env); res.Outcomes()[0].DNAT {
		t.Fatal("flushed chain still DNATs")
	}
	w.now = w.now.Add(2 * time.Hour)
	w.sync()
	if res := trace.Trace(kernel(t, w.fake), pkt, env); len(res.Outcomes()) != 3 {
		t.Errorf("not repaired: %+v", res.Outcomes())
	}
	w.assertMatchesFullSync()
}

func TestFlushedTablesAreNoticed(t *testing.T) {
	w := newWorld(t)
	w.addWeb(2)
	w.sync()
	n := len(w.fake.Restores)
	// A firewall reload wipes the nat table; no Service changes.
	w.fake.FlushAll("nat")
	w.now = w.now.Add(time.Minute)
	w.sync()
	if len(w.fake.Restores) != n+1 || count(w.lastRestore(), ":KUBE-SVC-") != 2 {
		t.Fatalf("flush not repaired:\n%s", w.lastRestore())
	}
	w.assertMatchesFullSync()
	pkt := trace.Packet{Src: podOnNode, Dst: netip.MustParseAddrPort("10.96.1.1:80"), Proto: "tcp"}
	if o := trace.Trace(kernel(t, w.fake), pkt, env).Outcomes(); len(o) != 3 {
		t.Errorf("after repair: %+v", o)
	}
	// Within the canary period nothing is checked: a quiet sync is free.
	w.sync()
	if len(w.fake.Restores) != n+1 {
		t.Error("quiet sync restored")
	}
}

func TestNetworkProgrammingLatency(t *testing.T) {
	w := newWorld(t)
	w.addWeb(1)
	w.sync()
	trigger := w.now.Add(-3 * time.Second)
	s := proxytest.WebSlice(0, 3, false)
	s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: trigger.Format(time.RFC3339Nano)}
	w.tracker.OnEndpointSliceUpdate(nil, s)
	w.sync() // now = trigger + 4s
	h := &dto.Metric{}
	if err := w.metrics.NetworkProgramming.Write(h); err != nil {
		t.Fatal(err)
	}
	// The first sync observed the initial adds (arrival time = now), the
	// second the annotated change.
	if c, s := h.GetHistogram().GetSampleCount(), h.GetHistogram().GetSampleSum(); c != 2 || s < 4 || s > 6 {
		t.Errorf("latency samples = %d, sum %v", c, s)
	}
}

func counterValue(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := c.Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func TestCanaryIsCheckedAfterAChangeIsApplied(t *testing.T) {
	w := newWorld(t)
	w.addWeb(3)
	w.sync()
	w.fake.FlushAll("filter") // the canary goes with it; nat is intact
	w.now = w.now.Add(time.Minute)
	n := len(w.fake.Restores)
	w.tracker.OnEndpointSliceUpdate(nil, proxytest.WebSlice(1, 3, false))
	w.sync()
	// The change went in first, as a partial sync...
	if len(w.fake.Restores) != n+1 || count(w.lastRestore(), ":KUBE-SVC-") != 1 {
		t.Fatalf("the change was not applied as a partial sync:\n%s", w.lastRestore())
	}
	// ...then the missing canary made the next sync a full one.
	w.sync()
	if count(w.lastRestore(), ":KUBE-SVC-") != 3 {
		t.Errorf("no full sync after the flush was noticed:\n%s", w.lastRestore())
	}
	w.assertMatchesFullSync()
}
