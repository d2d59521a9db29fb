package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	utiliptables "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/kubeclient"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/conntrack"
	"github.com/svcnet/svcnet/internal/proxy/healthcheck"
	"github.com/svcnet/svcnet/internal/proxy/iptables"
	"github.com/svcnet/svcnet/internal/proxy/nftables"
	"github.com/svcnet/svcnet/internal/proxy/userspace"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// syncer is what every mode's proxier offers the runner and the servers.
type syncer interface {
	Sync(ctx context.Context) error
	LastSuccess() time.Time
}

// OS is every effect `svcnet proxy` has on its network namespace besides
// the sockets it serves on, so that the whole assembly runs against fakes
// in tests.
type OS struct {
	IPTables utiliptables.Executor
	// NFTables opens the namespace's nf_tables for the nftables mode;
	// NFTablesCleanup deletes that mode's tables. Nil in tests that run
	// without a kernel.
	NFTables        func(v1.IPFamily) (*nftables.Kernel, error)
	NFTablesCleanup func() error
	Conntrack       conntrack.Interface
	Interfaces      Interfaces
	// Sockets are the userspace mode's proxy sockets and endpoint dials.
	Sockets userspace.Sockets
	// HealthCheckListener opens health-check node ports.
	HealthCheckListener healthcheck.Listener
	// IPVS is the ipvs mode's access to the kernel; nil in tests that
	// run without one.
	IPVS *IPVSAccess
}

// RealOS programs the namespace the process runs in.
func RealOS(o Options) OS {
	return OS{
		IPTables:            &utiliptables.Exec{Binary: o.IPTablesBinary},
		NFTables:            nftables.OpenKernel,
		NFTablesCleanup:     nftables.Cleanup,
		Conntrack:           &conntrack.Exec{},
		Interfaces:          Netlink{},
		Sockets:             userspace.Real{},
		HealthCheckListener: healthcheck.AllAddresses,
		IPVS:                realIPVS(),
	}
}

// deps is what a mode is started with.
type deps struct {
	ctx       context.Context
	opts      Options
	os        OS
	tracker   *svcstate.Tracker
	metrics   *proxy.Metrics
	logger    *slog.Logger
	node      proxy.Node
	nodeIPs   []netip.Addr
	family    v1.IPFamily
	afterSync func(proxy.SyncResult)
	// whileDraining, set by a mode, says it has work left that no event
	// will trigger (the ipvs mode's drained real servers to delete).
	whileDraining func() bool
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
	cidr, _ := d.opts.clusterCIDR()
	maxChains := 0
	if ex, ok := d.os.IPTables.(*utiliptables.Exec); ok {
		var err error
		if maxChains, err = TuneIPTables(d.ctx, ex); err != nil {
			return nil, err
		}
		d.logger.Info("iptables backend", "binary", ex.Binary, "earlyCommit", ex.EarlyCommit, "maxChainsPerRestore", maxChains)
	}
	return iptables.NewProxier(iptables.ProxierConfig{
		Rules: iptables.Config{
			Family:            d.family,
			Node:              d.node,
			NodeIPs:           d.nodeIPs,
			ClusterCIDR:       cidr,
			MasqueradeBit:     d.opts.MasqueradeBit,
			MasqueradeAll:     d.opts.MasqueradeAll,
			NodePortAddresses: d.opts.nodePortAddresses(d.nodeIPs, d.family),
		},
		Tracker:             d.tracker,
		Executor:            d.os.IPTables,
		Metrics:             d.metrics,
		Logger:              d.logger,
		EditTopLevelChains:  d.opts.EditTopLevelChains,
		MaxChainsPerRestore: maxChains,
		AfterSync:           d.afterSync,
	})
}

func startNFTables(d *deps) (syncer, error) {
	if d.os.NFTables == nil {
		return nil, fmt.Errorf("no nf_tables access configured")
	}
	cidr, _ := d.opts.clusterCIDR()
	serviceCIDRs, _ := d.opts.serviceCIDRs(d.family)
	k, err := d.os.NFTables(d.family)
	if err != nil {
		return nil, err
	}
	go func() { <-d.ctx.Done(); k.Close() }()
	return nftables.NewProxier(nftables.ProxierConfig{
		Rules: nftables.Config{
			Family:            d.family,
			Node:              d.node,
			NodeIPs:           d.nodeIPs,
			ClusterCIDR:       cidr,
			MasqueradeBit:     d.opts.MasqueradeBit,
			MasqueradeAll:     d.opts.MasqueradeAll,
			NodePortAddresses: d.opts.nodePortAddresses(d.nodeIPs, d.family),
			ServiceCIDRs:      serviceCIDRs,
		},
		Tracker:   d.tracker,
		Kernel:    k,
		Metrics:   d.metrics,
		Logger:    d.logger,
		AfterSync: d.afterSync,
	})
}

func startUserspace(d *deps) (syncer, error) {
	p, err := userspace.NewProxier(userspace.Config{
		Tracker:           d.tracker,
		Executor:          d.os.IPTables,
		Sockets:           d.os.Sockets,
		Node:              d.node,
		Family:            d.family,
		NodePortAddresses: d.opts.nodePortAddresses(d.nodeIPs, d.family),
		UDPIdleTimeout:    d.opts.UDPIdleTimeout,
		Metrics:           d.metrics,
		Logger:            d.logger,
		AfterSync:         d.afterSync,
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

// removeOtherModes removes the rules other modes left here (a previous
// proxy's in another mode): those that are dead without their process
// before this mode starts (deadAlone), the others after its first sync.
// Until then the rules a previous proxy left, in this mode or another,
// are what carries traffic, and a restart must not open a gap. Chains and
// jumps this mode shares with another (the iptables and ipvs modes'
// KUBE-SERVICES …) are kept; its sync has rewritten them.
func removeOtherModes(ctx context.Context, mode modeInfo, o OS, logger *slog.Logger, deadAlone bool) {
	var keep *utiliptables.Owned
	if mode.iptables != nil {
		keep = mode.iptables()
	}
	for _, m := range modes {
		if m.cleanup == nil || m.name == mode.name || m.deadAlone != deadAlone {
			continue
		}
		if err := m.cleanup(ctx, o, keep); err != nil {
			logger.Warn("could not remove another mode's rules", "mode", m.name, "err", err)
		}
	}
}

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
	metrics := proxy.NewMetrics(reg)

	family := v1.IPv4Protocol
	node, nodeIPs, err := resolveNode(ctx, client, name, family, osdeps.Interfaces, logger)
	if err != nil {
		return err
	}
	logger.Info("starting proxy", "mode", mode.name, "node", node.Name, "zone", node.Zone, "nodeIPs", nodeIPs)

	// The runner exists before the informers start, so that the very
	// first event can kick it; it syncs once they have synced.
	var runner *proxy.Runner
	tracker := svcstate.NewTracker(svcstate.Config{
		NodeName:   node.Name,
		Logger:     logger,
		OnBadInput: metrics.CountBadInput,
		OnChange:   func() { runner.Run() },
	})

	var health healthcheck.ProxyHealth
	hcServices := healthcheck.NewServices(osdeps.HealthCheckListener, &health, logger)
	defer hcServices.Close()
	hcDesired := healthcheck.NewDesired(family)
	hcRetry := false
	d := &deps{ctx: ctx, opts: o, os: osdeps, tracker: tracker, metrics: metrics, logger: logger,
		node: node, nodeIPs: nodeIPs, family: family}
	d.afterSync = func(res proxy.SyncResult) {
		if hcDesired.Update(res) || hcRetry {
			err := hcServices.Sync(hcDesired.Services())
			hcRetry = err != nil
			if err != nil {
				logger.Warn("health-check node ports", "err", err)
			}
		}
		if mode.name == "userspace" {
			return // only the kernel modes leave DNAT state in conntrack
		}
		plan := conntrack.Plan(res.Previous, res.Current, res.Changed, node, family)
		if plan.Empty() {
			return
		}
		if err := conntrack.Apply(ctx, osdeps.Conntrack, plan, family); err != nil {
			metrics.ConntrackCleanupErrors.Inc()
			logger.Warn("could not clear all stale UDP conntrack entries", "err", err)
		} else {
			logger.Info("cleared stale UDP conntrack entries", "serviceIPs", len(plan.IPs), "nodePorts", len(plan.Ports),
				"endpoints", len(plan.NATs)+len(plan.PortNATs))
		}
	}
	removeOtherModes(ctx, mode, osdeps, logger, true)
	proxier, err := mode.start(d)
	if err != nil {
		return fmt.Errorf("%s mode: %w", mode.name, err)
	}
	health.LastSuccess = proxier.LastSuccess
	health.Timeout = 2 * o.SyncPeriod
	othersRemoved := false
	runner = proxy.NewRunner(proxy.RunnerConfig{Name: mode.name, MinInterval: o.MinSyncPeriod, MaxInterval: o.SyncPeriod, Logger: logger},
		func(ctx context.Context) error {
			err := proxier.Sync(ctx)
			if err == nil && !othersRemoved {
				othersRemoved = true
				removeOtherModes(ctx, mode, osdeps, logger, false)
			}
			return err
		})

	if d.whileDraining != nil {
		go func() {
			t := time.NewTicker(2 * time.Second)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if d.whileDraining() {
						runner.Run()
					}
				}
			}
		}()
	}
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
	svcReg, err := svcInformer.AddEventHandler(tracker.ServiceHandler())
	if err != nil {
		return err
	}
	sliceReg, err := sliceInformer.AddEventHandler(tracker.EndpointSliceHandler())
	if err != nil {
		return err
	}
	services.Start(ctx.Done())
	sliceFactory.Start(ctx.Done())
	defer services.Shutdown()
	defer sliceFactory.Shutdown()
	// The registrations, not the informers: an informer has synced when
	// its cache is full, its handlers (the tracker) only once they have
	// been handed every object. The first sync must see them all, or it
	// is a full sync of half the cluster followed by a huge partial one.
	if !cache.WaitForCacheSync(ctx.Done(), svcReg.HasSynced, sliceReg.HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("informer caches did not sync")
	}
	logger.Info("informers synced; syncing rules", "services", len(svcInformer.GetStore().ListKeys()),
		"endpointSlices", len(sliceInformer.GetStore().ListKeys()))
	go runner.Loop(ctx)

	select {
	case <-ctx.Done():
		return nil
	case err := <-errCh:
		return err
	}
}
