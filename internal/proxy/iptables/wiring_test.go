package iptables_test

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/iptables/iptablestest"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/iptables"
	"github.com/svcnet/svcnet/internal/proxy/trace"
	"github.com/svcnet/svcnet/internal/svcstate"
	. "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

// TestWiring is `svcnet proxy` in miniature: informers feed the tracker,
// the tracker kicks the runner, the runner syncs the proxier, the proxier
// programs the (fake) kernel.
func TestWiring(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	client := fake.NewClientset()
	metrics := proxy.NewMetrics(nil)

	var runner *proxy.Runner
	tracker := svcstate.NewTracker(svcstate.Config{
		NodeName:   "node-a",
		Logger:     quiet,
		OnBadInput: metrics.CountBadInput,
		OnChange:   func() { runner.Run() },
	})
	fakeKernel := iptablestest.NewFake()
	proxier, err := iptables.NewProxier(iptables.ProxierConfig{
		Sync:               proxy.SyncerConfig{Tracker: tracker, Metrics: metrics, Logger: quiet},
		Rules:              nodeConfig,
		Executor:           fakeKernel,
		EditTopLevelChains: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	runner = proxy.NewRunner(proxy.RunnerConfig{Name: "iptables", MinInterval: 10 * time.Millisecond, Logger: quiet}, proxier.Sync)

	factory := informers.NewSharedInformerFactory(client, 0)
	if _, err := factory.Core().V1().Services().Informer().AddEventHandler(tracker.ServiceHandler()); err != nil {
		t.Fatal(err)
	}
	if _, err := factory.Discovery().V1().EndpointSlices().Informer().AddEventHandler(tracker.EndpointSliceHandler()); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), factory.Core().V1().Services().Informer().HasSynced,
		factory.Discovery().V1().EndpointSlices().Informer().HasSynced) {
		t.Fatal("caches did not sync")
	}
	go runner.Loop(ctx)

	svc := Service("default", "web", "10.96.0.10", Port("http", tcp, 80, 0))
	slice := Slice("default", "web", "web-1", SlicePort("http", tcp, 8080),
		Endpoint("10.244.1.2", "node-a"), Endpoint("10.244.2.2", "node-b"), Endpoint("10.244.3.2", "node-c"))
	if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pkt := trace.Packet{Src: podOnNode, Dst: netip.MustParseAddrPort("10.96.0.10:80"), Proto: "tcp"}
	waitFor(t, func() bool { return len(trace.Trace(kernel(t, fakeKernel), pkt, env).Outcomes()) == 3 })

	// An endpoint goes away; the rules follow.
	slice.Endpoints = slice.Endpoints[:2]
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(trace.Trace(kernel(t, fakeKernel), pkt, env).Outcomes()) == 2 })

	// The service goes away, and its chains with it.
	if err := client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		return !strings.Contains(strings.Join(fakeKernel.Chains("nat"), " "), "KUBE-SVC-")
	})
	if proxier.LastSuccess().IsZero() || proxier.Applied() == nil {
		t.Error("no successful sync recorded")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
