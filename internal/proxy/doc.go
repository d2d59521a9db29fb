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
//	svcReg, _ := services.AddEventHandler(tracker.ServiceHandler())
//	sliceReg, _ := slices.AddEventHandler(tracker.EndpointSliceHandler())
//	factory.Start(ctx.Done())
//	// The registrations' HasSynced: the tracker has seen every object.
//	cache.WaitForCacheSync(ctx.Done(), svcReg.HasSynced, sliceReg.HasSynced)
//	go runner.Loop(ctx) // first sync at once, with the whole cluster known
//
// internal/proxy/app does exactly this for `svcnet proxy`.
//
// The tracker never blocks informers; the runner coalesces their bursts;
// the proxier decides between partial and full syncs and remembers what
// it could not apply.
package proxy
