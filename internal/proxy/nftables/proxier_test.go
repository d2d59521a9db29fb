package nftables_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/svcnet/svcnet/internal/netns"
	nft "github.com/svcnet/svcnet/internal/nftables"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/nftables"
	"github.com/svcnet/svcnet/internal/proxy/proxytest"
	"github.com/svcnet/svcnet/internal/svcstate"
	st "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

var tcp = v1.ProtocolTCP

// world is a tracker and a proxier on the kernel of a network namespace
// of the test's own.
type world struct {
	t       *testing.T
	ns      string
	cfg     nftables.Config
	tracker *svcstate.Tracker
	kernel  *nftables.Kernel
	proxier *nftables.Proxier
	metrics *proxy.Metrics
	now     time.Time
}

func newWorld(t *testing.T) *world {
	if os.Geteuid() != 0 {
		t.Skip("nf_tables in a network namespace needs root; CI runs as root")
	}
	w := &world{t: t, cfg: configOf(proxytest.Node), metrics: proxy.NewMetrics(nil),
		now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	w.cfg.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}
	w.ns = fmt.Sprintf("svcnet-test-nftproxy-%d", rand.IntN(1e9))
	if err := netns.Create(w.ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Delete(w.ns) })
	if err := netns.Do(w.ns, func() (err error) {
		w.kernel, err = nftables.OpenKernel(v1.IPv4Protocol)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.kernel.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w.tracker = svcstate.NewTracker(svcstate.Config{NodeName: "node-a", Logger: quiet, Now: func() time.Time { return w.now }})
	p, err := nftables.NewProxier(nftables.ProxierConfig{
		Sync:   proxy.SyncerConfig{Tracker: w.tracker, Metrics: w.metrics, Logger: quiet, Now: func() time.Time { return w.now }},
		Rules:  w.cfg,
		Kernel: w.kernel,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.proxier = p
	return w
}

func (w *world) sync() {
	w.t.Helper()
	w.now = w.now.Add(2 * time.Second) // past the stale-chain delay
	if err := w.proxier.Sync(context.Background()); err != nil {
		w.t.Fatalf("sync: %v", err)
	}
}

// kernelTable reads the table back from the kernel.
func (w *world) kernelTable() string {
	w.t.Helper()
	t, err := w.kernel.Reader.Table()
	if err != nil {
		w.t.Fatal(err)
	}
	return t.Format()
}

// fullTable is what a full sync of the current snapshot writes into an
// empty namespace, as the reader sees it (no table or chain comments).
func (w *world) fullTable() string {
	plan := nftables.Build(w.cfg, nftables.Input{Snapshot: w.tracker.Current(), Full: true})
	t := *plan.Table
	t.Comment = ""
	t.Chains = nil
	for _, c := range plan.Table.Chains {
		cc := *c
		cc.Comment = ""
		t.Chains = append(t.Chains, &cc)
	}
	return t.Format()
}

// assertMatchesFullSync checks that the kernel holds exactly what a full
// sync would write, stale chains included (one more sync deletes them).
func (w *world) assertMatchesFullSync(what string) {
	w.t.Helper()
	w.sync() // deletes the chains the last sync emptied
	if got, want := w.kernelTable(), w.fullTable(); got != want {
		w.t.Errorf("%s: kernel differs from a full sync:\n%s", what, proxytest.LineDiff(want, got))
	}
}

func webService(i int, opts ...st.ServiceOption) *v1.Service {
	opts = append([]st.ServiceOption{st.Port("http", tcp, 80, int32(30000+i)), st.Type(v1.ServiceTypeNodePort)}, opts...)
	return st.Service("default", fmt.Sprintf("web-%d", i), fmt.Sprintf("10.96.1.%d", i), opts...)
}

func webSlice(i, n int) *discovery.EndpointSlice {
	name := fmt.Sprintf("web-%d", i)
	opts := []st.SliceOption{st.SlicePort("http", tcp, 8080)}
	for j := range n {
		opts = append(opts, st.Endpoint(fmt.Sprintf("10.244.%d.%d", 1+j, i), fmt.Sprintf("node-%c", 'a'+j)))
	}
	return st.Slice("default", name, name+"-abc", opts...)
}

// TestProxierIncrementalEqualsFull applies changes one sync at a time to
// a real kernel and expects, after each, the table a full sync writes.
func TestProxierIncrementalEqualsFull(t *testing.T) {
	w := newWorld(t)
	for i := range 5 {
		w.tracker.OnServiceAdd(webService(i))
		w.tracker.OnEndpointSliceAdd(webSlice(i, 3))
	}
	w.sync()
	w.assertMatchesFullSync("first sync")

	steps := []struct {
		name string
		do   func()
	}{
		{"an endpoint goes", func() { w.tracker.OnEndpointSliceUpdate(webSlice(1, 3), webSlice(1, 2)) }},
		{"an endpoint comes", func() { w.tracker.OnEndpointSliceUpdate(webSlice(2, 3), webSlice(2, 4)) }},
		{"all endpoints go", func() { w.tracker.OnEndpointSliceUpdate(webSlice(3, 3), webSlice(3, 0)) }},
		{"they come back", func() { w.tracker.OnEndpointSliceUpdate(webSlice(3, 0), webSlice(3, 2)) }},
		{"session affinity on", func() { w.tracker.OnServiceUpdate(webService(0), webService(0, st.Affinity(600))) }},
		{"its timeout changes", func() { w.tracker.OnServiceUpdate(webService(0, st.Affinity(600)), webService(0, st.Affinity(60))) }},
		{"session affinity off", func() { w.tracker.OnServiceUpdate(webService(0, st.Affinity(60)), webService(0)) }},
		{"Local external policy", func() { w.tracker.OnServiceUpdate(webService(4), webService(4, st.ExternalLocal(32000))) }},
		{"an external IP shared by two services", func() {
			w.tracker.OnServiceUpdate(webService(1), webService(1, st.ExternalIPs("203.0.113.9")))
			w.tracker.OnServiceUpdate(webService(2), webService(2, st.ExternalIPs("203.0.113.9")))
		}},
		{"its first owner lets go", func() { w.tracker.OnServiceUpdate(webService(1, st.ExternalIPs("203.0.113.9")), webService(1)) }},
		{"a service goes", func() {
			w.tracker.OnEndpointSliceDelete(webSlice(2, 4))
			w.tracker.OnServiceDelete(webService(2, st.ExternalIPs("203.0.113.9")))
		}},
		{"a load balancer with source ranges", func() {
			w.tracker.OnServiceAdd(webService(7, st.Type(v1.ServiceTypeLoadBalancer), st.LoadBalancer("198.51.100.7"), st.SourceRanges("192.168.0.0/24")))
			w.tracker.OnEndpointSliceAdd(webSlice(7, 2))
		}},
	}
	for _, s := range steps {
		s.do()
		w.sync()
		w.assertMatchesFullSync(s.name)
	}
	// A full sync over the table: a chain and an affinity set left by a
	// service that went while the proxy was down must go too.
	tx := nft.NewTx(nft.IPv4, nftables.TableName)
	tx.AddSet(&nft.Set{Name: nftables.PrefixAffinity + "GHOST-default/ghost/tcp/http__10.1.1.1/80", Key: nft.KeyAddr, Timeout: time.Hour})
	tx.AddChain(&nft.Chain{Name: nftables.PrefixService + "GHOST-default/ghost/tcp/http"})
	tx.AddRule(nftables.PrefixService+"GHOST-default/ghost/tcp/http", nft.R(nft.MatchAddrSet{Src: true, Set: nftables.PrefixAffinity + "GHOST-default/ghost/tcp/http__10.1.1.1/80"}, nft.Verdict{Kind: nft.Drop}))
	if err := w.kernel.Conn.Run(tx); err != nil {
		t.Fatal(err)
	}
	w.proxier.RequestFullSync()
	w.sync()
	w.assertMatchesFullSync("a full sync over the table")
	if n := counter(t, w.metrics.NFTablesSyncFailures); n != 0 {
		t.Errorf("%v failed transactions", n)
	}
}

// TestProxierRepairsDeletedTable deletes the table behind the proxier's
// back: the canary check notices and the next sync writes it all again.
func TestProxierRepairsDeletedTable(t *testing.T) {
	w := newWorld(t)
	w.tracker.OnServiceAdd(webService(0))
	w.tracker.OnEndpointSliceAdd(webSlice(0, 2))
	w.sync()
	if err := netns.Do(w.ns, nftables.Cleanup); err != nil {
		t.Fatal(err)
	}
	if ok, _ := w.kernel.Reader.Exists(); ok {
		t.Fatal("cleanup left the table")
	}
	w.now = w.now.Add(time.Minute) // past the canary period
	w.sync()
	if got, want := w.kernelTable(), w.fullTable(); got != want {
		t.Errorf("not repaired:\n%s", proxytest.LineDiff(want, got))
	}
}

// TestProxierReplacesForeignTable finds a table of the same name whose
// sets have other types (another program's): the first full sync fails,
// the next one starts from nothing.
func TestProxierReplacesForeignTable(t *testing.T) {
	w := newWorld(t)
	tx := nft.NewTx(nft.IPv4, nftables.TableName)
	tx.AddTable("")
	tx.AddSet(&nft.Set{Name: nftables.MapServiceIPs, Key: nft.KeyAddr}) // a set, not a map
	tx.AddChain(&nft.Chain{Name: "someone-elses"})
	if err := w.kernel.Conn.Run(tx); err != nil {
		t.Fatal(err)
	}
	w.tracker.OnServiceAdd(webService(0))
	w.tracker.OnEndpointSliceAdd(webSlice(0, 2))
	w.now = w.now.Add(time.Second)
	if err := w.proxier.Sync(context.Background()); err == nil {
		t.Fatal("the first sync over a foreign table succeeded")
	}
	w.sync()
	if got, want := w.kernelTable(), w.fullTable(); got != want {
		t.Errorf("not replaced:\n%s", proxytest.LineDiff(want, got))
	}
	if strings.Contains(w.kernelTable(), "someone-elses") {
		t.Error("the foreign chain survived")
	}
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestProxierFreshInChunks: a first sync into no table, too big for one
// transaction of freshRulesPerTx rules, goes in several and leaves the
// same table as one would, affinity chains and sets included.
func TestProxierFreshInChunks(t *testing.T) {
	w := newWorld(t)
	for i := range 400 {
		var opts []st.ServiceOption
		if i%10 == 0 {
			opts = append(opts, st.Affinity(600))
		}
		svc := webService(i, opts...)
		svc.Spec.ClusterIP = fmt.Sprintf("10.96.%d.%d", 2+i/250, i%250+1)
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
		svc.Spec.Ports[0].NodePort = int32(30000 + i)
		w.tracker.OnServiceAdd(svc)
		eps := []st.SliceOption{st.SlicePort("http", tcp, 8080)}
		for j := range 3 {
			eps = append(eps, st.Endpoint(fmt.Sprintf("10.%d.%d.%d", 244+j, i/250, i%250+1), fmt.Sprintf("node-%c", 'a'+j)))
		}
		w.tracker.OnEndpointSliceAdd(st.Slice("default", svc.Name, svc.Name+"-abc", eps...))
	}
	w.sync()
	plan := nftables.Build(w.cfg, nftables.Input{Snapshot: w.tracker.Current(), Full: true, Fresh: true})
	if n := len(plan.FreshTxs(nft.IPv4)); n < 3 {
		t.Fatalf("the plan makes %d transactions: the test covers no chunking", n)
	}
	if got, want := w.kernelTable(), w.fullTable(); got != want {
		t.Errorf("kernel after a chunked first sync differs from a full sync:\n%s", proxytest.LineDiff(want, got))
	}
}
