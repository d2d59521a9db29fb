package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/bpflb"
	utiliptables "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/kubeclient"
	"github.com/svcnet/svcnet/internal/programmed"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/conntrack"
	ebpfproxy "github.com/svcnet/svcnet/internal/proxy/ebpf"
	"github.com/svcnet/svcnet/internal/proxy/healthcheck"
	"github.com/svcnet/svcnet/internal/proxy/iptables"
	"github.com/svcnet/svcnet/internal/proxy/nftables"
	"github.com/svcnet/svcnet/internal/proxy/userspace"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// syncer is what every mode's proxier (a proxy.Syncer) offers the runner
// and the servers.
type syncer interface {
	Sync(ctx context.Context) error
	LastSuccess() time.Time
	Again() bool
	Programmed() uint64
}

// OS is every effect `svcnet proxy` has on its network namespace besides
// the sockets it serves on, so that the whole assembly runs against fakes
// in tests.
type OS struct {
	IPTables utiliptables.Executor
	// IP6Tables is ip6tables, for the IPv6 side of a dual-stack mode;
	// nil: IPv4 only.
	IP6Tables utiliptables.Executor
	// NFTables opens the namespace's nf_tables for the nftables mode;
	// NFTablesCleanup deletes that mode's tables. Nil in tests that run
	// without a kernel.
	NFTables        func(v1.IPFamily) (*nftables.Kernel, error)
	NFTablesCleanup func() error
	// EBPFCleanup deletes what the ebpf mode leaves (its masquerade
	// tables); nil in tests without a kernel.
	EBPFCleanup func() error
	Conntrack   conntrack.Interface
	Interfaces  Interfaces
	// Sockets are the userspace mode's proxy sockets and endpoint dials.
	Sockets userspace.Sockets
	// HealthCheckListener opens health-check node ports.
	HealthCheckListener healthcheck.Listener
	// IPVS is the ipvs mode's access to the kernel; nil in tests that
	// run without one.
	IPVS *IPVSAccess
	// Counters are the nfacct counters the iptables mode counts in; nil:
	// none.
	Counters Counters
}

// RealOS programs the namespace the process runs in.
func RealOS(o Options) OS {
	return OS{
		IPTables:            &utiliptables.Exec{Binary: o.IPTablesBinary},
		IP6Tables:           &utiliptables.Exec{Binary: IP6Binary(o.IPTablesBinary)},
		NFTables:            nftables.OpenKernel,
		NFTablesCleanup:     nftables.Cleanup,
		EBPFCleanup:         cleanupEBPF,
		Conntrack:           &conntrack.Netlink{},
		Interfaces:          Netlink{},
		Sockets:             userspace.Real{},
		HealthCheckListener: healthcheck.AllAddresses,
		IPVS:                realIPVS(),
		Counters:            kernelCounters{},
	}
}

// IP6Binary is the ip6tables command of the same backend as the iptables
// command b: iptables-legacy gives ip6tables-legacy.
func IP6Binary(b string) string {
	dir, file := filepath.Split(b)
	if rest, ok := strings.CutPrefix(file, "iptables"); ok {
		return dir + "ip6tables" + rest
	}
	return b
}

// executors are the iptables of each family there is.
func (o OS) executors() []utiliptables.Executor {
	if o.IP6Tables == nil {
		return []utiliptables.Executor{o.IPTables}
	}
	return []utiliptables.Executor{o.IPTables, o.IP6Tables}
}

// deps is what a mode is started with.
type deps struct {
	ctx    context.Context
	opts   Options
	os     OS
	logger *slog.Logger
	// node and sync are the family's node and sync configurations, the
	// same for every mode.
	node     proxy.NodeConfig
	sync     proxy.SyncerConfig
	iptables utiliptables.Executor // of the family
	// primary: the first family, which registers what is not per family.
	primary  bool
	register func(prometheus.Collector) error
	// shared is what the families' proxiers of one mode share.
	shared *shared
}

// shared is what a mode's proxiers of both families share.
type shared struct {
	ebpf   *ebpfproxy.Kernel // the maps, and the ids of their backend sets
	ebpfLB *bpflb.LB         // the programs
}

// TuneIPTables sets up ex for the iptables mode on its backend and
// returns the chains per restore to use (0: no limit). On the nft
// backend: early commit, and ~1,000 chains per restore, measured on
// iptables 1.8.9 as where the per-chain cost and the per-restore
// overhead balance (10,000 services load in ~10 s).
func TuneIPTables(ctx context.Context, ex *utiliptables.Exec) (int, error) {
	backend, err := ex.Backend(ctx)
	if err != nil || backend != utiliptables.BackendNFT {
		return 0, err
	}
	ex.EarlyCommit = true
	return 1000, nil
}

func startIPTables(d *deps) (syncer, error) {
	if d.iptables == nil {
		return nil, fmt.Errorf("no %s iptables", d.node.Family)
	}
	// ip6tables may be missing, or IPv6 disabled: find out before the
	// family is proxied, not at every sync.
	if d.node.Family == v1.IPv6Protocol {
		if _, err := d.iptables.Save(d.ctx, "nat"); err != nil {
			return nil, err
		}
	}
	maxChains := 0
	if ex, ok := d.iptables.(*utiliptables.Exec); ok {
		var err error
		if maxChains, err = TuneIPTables(d.ctx, ex); err != nil {
			return nil, err
		}
		d.logger.Info("iptables backend", "binary", ex.Binary, "earlyCommit", ex.EarlyCommit, "maxChainsPerRestore", maxChains)
	}
	rules := iptables.Config{NodeConfig: d.node}
	if d.os.Counters != nil {
		// As kube-proxy: count the conntrack-invalid drops where the
		// kernel has nfacct.
		if err := d.os.Counters.Ensure(invalidCounter); err != nil {
			d.logger.Warn("conntrack-invalid drops are not counted: no nfacct counter", "err", err)
		} else {
			rules.InvalidCounter = invalidCounter
			if d.primary {
				if err := d.register(invalidDropped(d.os.Counters)); err != nil {
					return nil, err
				}
			}
		}
	}
	return iptables.NewProxier(iptables.ProxierConfig{
		Rules:               rules,
		Sync:                d.sync,
		Executor:            d.iptables,
		EditTopLevelChains:  d.opts.EditTopLevelChains,
		MaxChainsPerRestore: maxChains,
	})
}

func startNFTables(d *deps) (syncer, error) {
	if d.os.NFTables == nil {
		return nil, fmt.Errorf("no nf_tables access configured")
	}
	serviceCIDRs, _ := d.opts.serviceCIDRs(d.node.Family)
	k, err := d.os.NFTables(d.node.Family)
	if err != nil {
		return nil, err
	}
	go func() { <-d.ctx.Done(); k.Close() }()
	return nftables.NewProxier(nftables.ProxierConfig{
		Rules:  nftables.Config{NodeConfig: d.node, ServiceCIDRs: serviceCIDRs},
		Sync:   d.sync,
		Kernel: k,
	})
}

func startUserspace(d *deps) (syncer, error) {
	p, err := userspace.NewProxier(userspace.Config{
		Rules:          d.node,
		Sync:           d.sync,
		Executor:       d.os.IPTables,
		Sockets:        d.os.Sockets,
		UDPIdleTimeout: d.opts.UDPIdleTimeout,
	})
	if err != nil {
		return nil, err
	}
	go func() { <-d.ctx.Done(); p.Close() }()
	return p, nil
}

// Run runs the proxy until ctx ends.
func Run(ctx context.Context, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.Cleanup {
		return CleanupAll(ctx, RealOS(o))
	}
	client, _, err := kubeclient.New(o.Kubeconfig, kubeclient.Options{UserAgent: "svcnet-proxy", QPS: 50, Burst: 100})
	if err != nil {
		return err
	}
	return RunWith(ctx, o, client, RealOS(o))
}

// CleanupAll removes the rules of every mode, as kube-proxy --cleanup
// does.
func CleanupAll(ctx context.Context, o OS) error {
	var failed []error
	for _, m := range modes {
		if m.cleanup != nil {
			if err := m.cleanup(ctx, o, nil); err != nil {
				failed = append(failed, fmt.Errorf("%s mode: %w", m.name, err))
			}
		}
	}
	return errors.Join(failed...)
}

// afterSync is what follows a family's sync that changed something:
// health-check node ports (from the primary family's view: one listener
// per Service serves both) and the UDP conntrack entries the change left
// stale.
func afterSync(d *deps, mode modeInfo, o OS, hcServices *healthcheck.Services, primary bool) func(proxy.SyncResult) {
	family := d.node.Family
	hcDesired := healthcheck.NewDesired(family)
	hcRetry := false
	log := d.logger.With("ipFamily", string(family))
	return func(res proxy.SyncResult) {
		if primary && (hcDesired.Update(res) || hcRetry) {
			err := hcServices.Sync(hcDesired.Services())
			hcRetry = err != nil
			if err != nil {
				log.Warn("health-check node ports", "err", err)
			}
		}
		if !mode.conntrack {
			return
		}
		plan := conntrack.Plan(res.Previous, res.Current, res.Changed, d.node.Node, family)
		if plan.Empty() {
			return
		}
		deleted, err := o.Conntrack.Delete(d.ctx, plan, family)
		if err != nil {
			d.sync.Metrics.ConntrackCleanupErrors.Inc()
			log.Warn("could not clear all stale conntrack entries", "err", err)
		} else {
			log.Info("cleared stale conntrack entries", "entries", deleted, "serviceIPs", len(plan.IPs), "nodePorts", len(plan.Ports),
				"endpoints", len(plan.NATs)+len(plan.PortNATs))
		}
	}
}

// proxyStack is the proxiers of every family: a sync syncs them all.
type proxyStack []syncer

func (p proxyStack) Sync(ctx context.Context) error {
	var errs []error
	for _, s := range p {
		errs = append(errs, s.Sync(ctx))
	}
	return errors.Join(errs...)
}

// Again reports whether a family's mode has work left that no event
// brings (real servers draining, emptied chains to delete).
func (p proxyStack) Again() bool {
	return slices.ContainsFunc(p, syncer.Again)
}

// LastSuccess is the oldest of the families' last successes: the proxy
// is healthy when every family is.
func (p proxyStack) LastSuccess() time.Time {
	var oldest time.Time
	for i, s := range p {
		if t := s.LastSuccess(); i == 0 || t.Before(oldest) {
			oldest = t
		}
	}
	return oldest
}

// Programmed is the lowest of the families' watermarks: what every
// family's rules reflect.
func (p proxyStack) Programmed() uint64 {
	var low uint64
	for i, s := range p {
		if v := s.Programmed(); i == 0 || v < low {
			low = v
		}
	}
	return low
}

// removeOtherModes removes the rules other modes left here (a previous
// proxy's in another mode): those that are dead without their process
// before this mode starts (deadAlone), the others after its first sync.
// Until then the rules a previous proxy left, in this mode or another,
// are what carries traffic, and a restart must not open a gap. Chains and
// jumps this mode shares with another (the iptables and ipvs modes'
// KUBE-SERVICES …) are kept; its sync has rewritten them.
func removeOtherModes(ctx context.Context, mode modeInfo, o OS, logger *slog.Logger, deadAlone bool) bool {
	var keep *utiliptables.Owned
	if mode.iptables != nil {
		keep = mode.iptables()
	}
	ok := true
	for _, m := range modes {
		if m.cleanup == nil || m.name == mode.name || m.deadAlone != deadAlone {
			continue
		}
		if err := m.cleanup(ctx, o, keep); err != nil {
			logger.Warn("could not remove another mode's rules", "mode", m.name, "err", err)
			ok = false
		}
	}
	return ok
}

// againInterval is how often the proxy looks for work a mode has left:
// kube-proxy deletes emptied nftables chains after a second, and checks
// draining IPVS real servers every few.
const againInterval = 2 * time.Second

// maxRemovals bounds the attempts at removing other modes' rules.
const maxRemovals = 5

// proxyNameLabel and headlessLabel are the labels kube-proxy filters on:
// services handled by another proxy, and headless ones, are not ours.
const (
	proxyNameLabel = "service.kubernetes.io/service-proxy-name"
	headlessLabel  = "service.kubernetes.io/headless"
)

// RunWith runs the proxy with the given client and OS until ctx ends.
func RunWith(ctx context.Context, o Options, client kubernetes.Interface, osdeps OS) error {
	if err := o.Validate(); err != nil {
		return err
	}
	mode, _ := lookupMode(o.Mode)
	logger := slog.Default().With("component", "proxy")
	name := o.HostnameOverride
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("no --hostname-override and no hostname: %w", err)
		}
		name = strings.ToLower(h)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	families := []v1.IPFamily{v1.IPv4Protocol}
	if mode.dualStack {
		families = append(families, v1.IPv6Protocol)
	}
	node, nodeIPs, err := resolveNode(ctx, client, name, families, osdeps.Interfaces, logger)
	if err != nil {
		return err
	}
	logger.Info("starting proxy", "mode", mode.name, "node", node.Name, "zone", node.Zone, "nodeIPs", slices.Concat(nodeIPs[v1.IPv4Protocol], nodeIPs[v1.IPv6Protocol]))

	// The runner exists before the informers start, so that the very
	// first event can kick it; it syncs once they have synced.
	var runner *proxy.Runner
	var health healthcheck.ProxyHealth
	hcServices := healthcheck.NewServices(osdeps.HealthCheckListener, &health, logger)
	defer hcServices.Close()
	removeOtherModes(ctx, mode, osdeps, logger, true)
	// One proxier per family, each with its own tracker fed every event,
	// as kube-proxy's dual-stack proxier: a tracker's changes are consumed
	// by the sync that takes them.
	var (
		stack    proxyStack
		trackers []*svcstate.Tracker
		sh       shared
	)
	for _, family := range families {
		// Each family's metrics carry its ip_family label, as kube-proxy's
		// do: one family's sync may take seconds while the other's has
		// nothing to do.
		metrics := proxy.NewMetrics(nil) // registered once the family runs
		// Another family's slice changes nothing here but the version the
		// Lease publishes: a housekeeping sync, if one is published, that
		// does not hold back the other family's change it comes with (a
		// Run would, by the minimum interval, when this tracker hears of
		// the slice first).
		onVersion := func() {}
		if o.PublishProgrammed {
			onVersion = func() { runner.Tidy() }
		}
		cfg := svcstate.Config{NodeName: node.Name, Logger: logger, OnChange: func() { runner.Run() }, OnVersion: onVersion, Family: family}
		if family == families[0] {
			cfg.OnBadInput = metrics.CountBadInput // once, not per family
		}
		tracker := svcstate.NewTracker(cfg)
		d := &deps{ctx: ctx, opts: o, os: osdeps, logger: logger, iptables: osdeps.IPTables,
			primary: family == families[0], register: reg.Register, shared: &sh,
			node: o.nodeConfig(node, nodeIPs[family], family),
			sync: proxy.SyncerConfig{Tracker: tracker, Metrics: metrics, Logger: logger}}
		if family == v1.IPv6Protocol {
			d.iptables = osdeps.IP6Tables
		}
		d.sync.AfterSync = afterSync(d, mode, osdeps, hcServices, family == families[0])
		proxier, err := mode.start(d)
		if err != nil {
			if family == families[0] {
				return fmt.Errorf("%s mode: %w", mode.name, err)
			}
			// As kube-proxy, which runs single-stack where the node cannot
			// do the other family; said at every start, and in the docs.
			logger.Warn("IPv6 Services are not proxied on this node: its IPv6 side does not work", "mode", mode.name, "err", err)
			continue
		}
		metrics.MustRegister(prometheus.WrapRegistererWith(prometheus.Labels{"ip_family": string(family)}, reg))
		stack = append(stack, proxier)
		trackers = append(trackers, tracker)
	}
	health.LastSuccess = stack.LastSuccess
	health.Timeout = 2 * o.SyncPeriod
	// The other modes' rules go after the first sync; a removal that
	// fails (the xtables lock, a set still in use) is tried again after
	// the next syncs, a few times.
	removals := 0
	// The node agents wait, before they stop a pod, until every proxy
	// has programmed its removal: this proxy says how far it has.
	var publisher *programmed.Publisher
	if o.PublishProgrammed {
		publisher = programmed.NewPublisher(programmed.PublisherConfig{Client: client, Kind: "proxy", Holder: node.Name, Logger: logger,
			Healthy: func() bool { ok, _ := health.Healthy(); return ok }})
	}
	runner = proxy.NewRunner(proxy.RunnerConfig{Name: mode.name, MinInterval: o.MinSyncPeriod, MaxInterval: o.SyncPeriod, Logger: logger},
		func(ctx context.Context) error {
			if o.TestingSyncDelay > 0 {
				select {
				case <-time.After(o.TestingSyncDelay):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			err := stack.Sync(ctx)
			if err == nil && publisher != nil {
				publisher.Set(stack.Programmed())
			}
			if err == nil && removals < maxRemovals {
				removals++
				if removeOtherModes(ctx, mode, osdeps, logger, false) {
					removals = maxRemovals
				} else if removals == maxRemovals {
					logger.Error("gave up removing other modes' rules; `svcnet proxy --cleanup` removes them", "attempts", removals)
				}
			}
			return err
		})

	// Work a mode has left that no event brings is done by a sync soon
	// after, not at the next periodic one; that sync holds no change
	// back by the minimum interval.
	go func() {
		t := time.NewTicker(againInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if stack.Again() {
					runner.Tidy()
				}
			}
		}
	}()
	errCh := make(chan error, 2)
	metricsAddr, _ := bindAddress(o.MetricsBindAddress, 10249)
	if err := serveMetrics(ctx, metricsAddr, reg, &health, mode.name, errCh); err != nil {
		return err
	}
	healthzAddr, _ := bindAddress(o.HealthzBindAddress, 10256)
	if err := serveHealthz(ctx, healthzAddr, &health, errCh); err != nil {
		return err
	}

	services := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = "!" + proxyNameLabel }))
	sliceFactory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = "!" + proxyNameLabel + ",!" + headlessLabel }))
	svcInformer := services.Core().V1().Services().Informer()
	sliceInformer := sliceFactory.Discovery().V1().EndpointSlices().Informer()
	var synced []cache.InformerSynced
	for _, tracker := range trackers {
		svcReg, err := svcInformer.AddEventHandler(tracker.ServiceHandler())
		if err != nil {
			return err
		}
		sliceReg, err := sliceInformer.AddEventHandler(tracker.EndpointSliceHandler())
		if err != nil {
			return err
		}
		synced = append(synced, svcReg.HasSynced, sliceReg.HasSynced)
	}
	// Without --service-cidr, the ranges come from the ServiceCIDR
	// objects, as kube-proxy's do.
	var cidrsSynced cache.InformerSynced
	if o.ServiceCIDRs == "" && servesServiceCIDRs(client) {
		var setters []serviceCIDRSetter
		for _, s := range stack {
			if c, ok := s.(serviceCIDRSetter); ok {
				setters = append(setters, c)
			}
		}
		if len(setters) > 0 {
			var stop func()
			var err error
			cidrsSynced, stop, err = watchServiceCIDRs(ctx, client, setters, func() { runner.Run() }, logger)
			if err != nil {
				return err
			}
			defer stop()
		}
	}
	services.Start(ctx.Done())
	sliceFactory.Start(ctx.Done())
	defer services.Shutdown()
	defer sliceFactory.Shutdown()
	// The registrations, not the informers: an informer has synced when
	// its cache is full, its handlers (the tracker) only once they have
	// been handed every object. The first sync must see them all, or it
	// is a full sync of half the cluster followed by a huge partial one.
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("informer caches did not sync")
	}
	// The first sync waits a little for the service ranges too (a full
	// sync of a big table twice is seconds), not forever: a proxy that
	// may not read ServiceCIDRs still proxies, as kube-proxy does, and
	// drops nothing for want of ranges.
	if cidrsSynced != nil {
		wait, cancelWait := context.WithTimeout(ctx, serviceCIDRWait)
		if !cache.WaitForCacheSync(wait.Done(), cidrsSynced) && ctx.Err() == nil {
			logger.Warn("no service ranges yet: ServiceCIDRs not listed; unallocated cluster IPs are not dropped until they are",
				"waited", serviceCIDRWait)
		}
		cancelWait()
	}
	logger.Info("informers synced; syncing rules", "services", len(svcInformer.GetStore().ListKeys()),
		"endpointSlices", len(sliceInformer.GetStore().ListKeys()))
	go runner.Loop(ctx)
	if publisher != nil {
		go publisher.Run(ctx)
	}

	select {
	case <-ctx.Done():
		return nil
	case err := <-errCh:
		return err
	}
}
