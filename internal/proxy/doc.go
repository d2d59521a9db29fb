// Package proxy holds what every proxy mode shares: the sync runner,
// endpoint selection, and the proxy's metrics. Each mode lives in a folder
// below and turns a svcstate.Snapshot into kernel state.
//
// A mode is wired the same way whatever it programs:
//
//	metrics := proxy.NewMetrics(prometheus.DefaultRegisterer)
//	var runner *proxy.Runner
//	tracker := svcstate.NewTracker(svcstate.Config{
//		NodeName:   node,
//		OnBadInput: metrics.CountBadInput,
//		OnChange:   func() { runner.Run() },
//	})
//	proxier, err := iptables.NewProxier(iptables.ProxierConfig{
//		Rules: cfg, Tracker: tracker, Executor: iptables.NewExec(v1.IPv4Protocol), Metrics: metrics,
//	})
//	runner = proxy.NewRunner(proxy.RunnerConfig{Name: "iptables", MaxInterval: 30 * time.Second}, proxier.Sync)
//	// informers: Services and discovery.k8s.io/v1 EndpointSlices
//	services.AddEventHandler(tracker.ServiceHandler())
//	slices.AddEventHandler(tracker.EndpointSliceHandler())
//	factory.Start(ctx.Done()); cache.WaitForCacheSync(...)
//	go runner.Loop(ctx) // first sync at once, with the whole cluster known
//
// The tracker never blocks informers; the runner coalesces their bursts;
// the proxier decides between partial and full syncs and remembers what
// it could not apply.
package proxy
