// Package proxy holds what every proxy mode shares: the sync runner, the
// sync skeleton (Syncer), the node configuration (NodeConfig), endpoint
// selection, and the proxy's metrics. Each mode lives in a folder
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
//		Rules:    iptables.Config{NodeConfig: node},
//		Sync:     proxy.SyncerConfig{Tracker: tracker, Metrics: metrics},
//		Executor: iptables.NewExec(v1.IPv4Protocol),
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
// every mode's proxier is a Syncer, which decides between partial and
// full syncs, remembers what it could not apply, and does the metrics,
// the log and what follows a sync the same way whatever the mode. A mode
// supplies only the Mode: "apply this snapshot and these changes", and
// its kernel canary.
package proxy
