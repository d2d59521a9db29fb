// Package controllermanager runs svcnet's controllers, the way
// kube-controller-manager does: shared informers, one work queue per
// controller, leader election through a coordination.k8s.io Lease so that
// of several replicas only one acts, and /healthz and /metrics.
package controllermanager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/daemonset"
	"github.com/svcnet/svcnet/internal/controller/deployment"
	"github.com/svcnet/svcnet/internal/controller/endpoints"
	"github.com/svcnet/svcnet/internal/controller/endpointslice"
	"github.com/svcnet/svcnet/internal/controller/endpointslicemirroring"
	"github.com/svcnet/svcnet/internal/controller/job"
	"github.com/svcnet/svcnet/internal/controller/nodelifecycle"
	"github.com/svcnet/svcnet/internal/controller/podgc"
	"github.com/svcnet/svcnet/internal/controller/replicaset"
	"github.com/svcnet/svcnet/internal/controller/scheduler"
	"github.com/svcnet/svcnet/internal/controller/servicelb"
	"github.com/svcnet/svcnet/internal/controller/statefulset"
	"github.com/svcnet/svcnet/internal/kubeclient"
	"github.com/svcnet/svcnet/internal/prom"
)

// Options configure the controller manager; flag names follow
// kube-controller-manager.
type Options struct {
	Kubeconfig           string
	Controllers          []string // "*", names, or "-name" to leave one out
	Workers              int
	MaxEndpointsPerSlice int
	// LoadBalancerPool ("FIRST-LAST" or CIDRs) enables the service
	// load-balancer controller with the pool provider.
	LoadBalancerPool  string
	LoadBalancerClass string
	BindAddress       string // /healthz and /metrics, e.g. 127.0.0.1:10257
	// NodeMonitorGracePeriod is how long a node may post nothing before
	// it is marked Unknown; NodeMonitorPeriod how often nodes are checked.
	NodeMonitorGracePeriod time.Duration
	NodeMonitorPeriod      time.Duration
	// OrphanPodQuarantine is how long a pod's node must be missing before
	// the pod is deleted; PodGCPeriod how often pods are checked.
	OrphanPodQuarantine time.Duration
	PodGCPeriod         time.Duration
	// TerminatedPodGCThreshold is how many terminated pods may stay (0:
	// all).
	TerminatedPodGCThreshold int

	LeaderElect    bool
	LeaseNamespace string
	LeaseName      string
	Identity       string
	LeaseDuration  time.Duration
	RenewDeadline  time.Duration
	RetryPeriod    time.Duration
}

// Defaults returns kube-controller-manager's defaults.
func Defaults() Options {
	host, _ := os.Hostname()
	return Options{
		Controllers: []string{"*"}, Workers: 5, MaxEndpointsPerSlice: 100, BindAddress: "127.0.0.1:10257",
		LeaderElect: true, LeaseNamespace: "kube-system", LeaseName: "svcnet-controller-manager",
		Identity:      fmt.Sprintf("%s_%d", host, os.Getpid()),
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		NodeMonitorGracePeriod: nodelifecycle.DefaultGracePeriod, NodeMonitorPeriod: nodelifecycle.DefaultPeriod,
		OrphanPodQuarantine: podgc.DefaultQuarantine, PodGCPeriod: podgc.DefaultPeriod, TerminatedPodGCThreshold: podgc.DefaultTerminatedThreshold,
	}
}

// deps is what a controller may use.
type deps struct {
	client  kubernetes.Interface
	factory informers.SharedInformerFactory
	opts    Options
}

// runner starts one controller; it returns nil when the controller is
// not configured (e.g. no load-balancer pool).
type runner func(ctx context.Context, d deps) (func(ctx context.Context), error)

// controllers is the list of every controller, by name.
var controllers = []struct {
	name  string
	start runner
}{
	{"endpointslice", func(ctx context.Context, d deps) (func(context.Context), error) {
		c := endpointslice.New(d.client, d.factory, d.opts.MaxEndpointsPerSlice)
		return func(ctx context.Context) { c.Run(ctx, d.opts.Workers) }, nil
	}},
	{"endpoints", func(ctx context.Context, d deps) (func(context.Context), error) {
		c := endpoints.New(d.client, d.factory)
		return func(ctx context.Context) { c.Run(ctx, d.opts.Workers) }, nil
	}},
	{"endpointslicemirroring", func(ctx context.Context, d deps) (func(context.Context), error) {
		c := endpointslicemirroring.New(d.client, d.factory, d.opts.MaxEndpointsPerSlice)
		return func(ctx context.Context) { c.Run(ctx, d.opts.Workers) }, nil
	}},
	{"replicaset", workload("replicaset-controller", replicaset.New)},
	{"replicationcontroller", workload("replication-controller", replicaset.NewReplicationManager)},
	{"daemonset", workload("daemonset-controller", daemonset.New)},
	{"job", workload("job-controller", job.New)},
	{"statefulset", workload("statefulset-controller", statefulset.New)},
	{"deployment", workload("deployment-controller", deployment.New)},
	{"scheduler", func(ctx context.Context, d deps) (func(context.Context), error) {
		c := scheduler.New(d.client, d.factory, controller.NewRecorder(ctx, d.client, "default-scheduler"))
		return func(ctx context.Context) { c.Run(ctx, 1) }, nil
	}},
	{"nodelifecycle", func(ctx context.Context, d deps) (func(context.Context), error) {
		c := nodelifecycle.New(d.client, d.factory, controller.NewRecorder(ctx, d.client, "node-controller"), d.opts.NodeMonitorGracePeriod)
		return func(ctx context.Context) { c.Run(ctx, d.opts.NodeMonitorPeriod) }, nil
	}},
	{"podgc", func(ctx context.Context, d deps) (func(context.Context), error) {
		c := podgc.New(d.client, d.factory, d.opts.OrphanPodQuarantine, d.opts.TerminatedPodGCThreshold)
		return func(ctx context.Context) { c.Run(ctx, d.opts.PodGCPeriod) }, nil
	}},
	{"service-lb", func(ctx context.Context, d deps) (func(context.Context), error) {
		if d.opts.LoadBalancerPool == "" {
			return nil, nil
		}
		pool, err := servicelb.ParsePool(d.opts.LoadBalancerPool)
		if err != nil {
			return nil, err
		}
		c := servicelb.New(d.client, d.factory, pool, d.opts.LoadBalancerClass,
			controller.NewRecorder(ctx, d.client, "service-controller"))
		return func(ctx context.Context) { c.Run(ctx, 1) }, nil
	}},
}

// workload is the runner of a controller that newC makes from the
// client, the factory and a recorder of events as component, run with
// the configured number of workers.
func workload[C interface{ Run(context.Context, int) }](component string,
	newC func(kubernetes.Interface, informers.SharedInformerFactory, record.EventRecorder) C) runner {
	return func(ctx context.Context, d deps) (func(context.Context), error) {
		c := newC(d.client, d.factory, controller.NewRecorder(ctx, d.client, component))
		return func(ctx context.Context) { c.Run(ctx, d.opts.Workers) }, nil
	}
}

// Names lists the controllers.
func Names() []string {
	out := make([]string, len(controllers))
	for i, c := range controllers {
		out[i] = c.name
	}
	return out
}

func enabled(list []string, name string) bool {
	if slices.Contains(list, "-"+name) {
		return false
	}
	return slices.Contains(list, "*") || slices.Contains(list, name)
}

// Run runs the controller manager until ctx ends or leadership is lost.
func Run(ctx context.Context, o Options) error {
	for _, n := range o.Controllers {
		if n != "*" && !slices.Contains(Names(), strings.TrimPrefix(n, "-")) {
			return fmt.Errorf("unknown controller %q; known: %s", n, strings.Join(Names(), ", "))
		}
	}
	if o.NodeMonitorPeriod <= 0 || o.NodeMonitorGracePeriod <= 0 || o.PodGCPeriod <= 0 || o.OrphanPodQuarantine < 0 {
		return fmt.Errorf("--node-monitor-period (%s), --node-monitor-grace-period (%s) and --pod-gc-period (%s) must be positive, --orphan-pod-quarantine (%s) not negative",
			o.NodeMonitorPeriod, o.NodeMonitorGracePeriod, o.PodGCPeriod, o.OrphanPodQuarantine)
	}
	if o.LoadBalancerPool != "" {
		if _, err := servicelb.ParsePool(o.LoadBalancerPool); err != nil {
			return err
		}
	}
	client, _, err := kubeclient.New(o.Kubeconfig, kubeclient.Options{UserAgent: "svcnet-controller-manager", QPS: 200, Burst: 400})
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	if err := controller.RegisterMetrics(reg); err != nil {
		return err
	}
	leader := prom.Gauge("svcnet_controller_manager_leader", "1 while this replica leads.")
	reg.MustRegister(leader)
	srvErr, err := serve(ctx, o.BindAddress, reg)
	if err != nil {
		return err
	}

	lead := func(ctx context.Context) error {
		leader.Set(1)
		slog.Info("controller manager leading", "identity", o.Identity)
		factory := informers.NewSharedInformerFactory(client, 0)
		d := deps{client: client, factory: factory, opts: o}
		var runs []func(context.Context)
		for _, c := range controllers {
			if !enabled(o.Controllers, c.name) {
				continue
			}
			run, err := c.start(ctx, d)
			if err != nil {
				return fmt.Errorf("controller %s: %w", c.name, err)
			}
			if run != nil {
				runs = append(runs, run)
				slog.Info("controller started", "controller", c.name)
			}
		}
		factory.Start(ctx.Done())
		for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("informer cache of %v did not sync", typ)
			}
		}
		for _, run := range runs {
			go run(ctx)
		}
		<-ctx.Done()
		return nil
	}
	if !o.LeaderElect {
		errCh := make(chan error, 1)
		go func() { errCh <- lead(ctx) }()
		select {
		case err := <-errCh:
			return err
		case err := <-srvErr:
			return err
		}
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.LeaseNamespace, o.LeaseName,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: o.Identity})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errCh := make(chan error, 1)
	lostCh := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: o.LeaseName,
		LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				if err := lead(ctx); err != nil {
					errCh <- err
				}
			},
			OnStoppedLeading: func() { leader.Set(0); close(lostCh) },
			OnNewLeader: func(id string) {
				if id != o.Identity {
					slog.Info("controller manager standing by", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	go le.Run(ctx)
	select {
	case err := <-errCh:
		return err
	case err := <-srvErr:
		return err
	case <-lostCh:
		if ctx.Err() != nil {
			return nil
		}
		// Like kube-controller-manager: a replica that lost the lease
		// stops, so that two never act at once.
		return errors.New("leader election lost")
	}
}

// serve answers /healthz and /metrics on addr until ctx ends.
func serve(ctx context.Context, addr string, reg *prometheus.Registry) (<-chan error, error) {
	errCh := make(chan error, 1)
	if addr == "" || addr == "0" {
		return errCh, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve metrics on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// Profiling, like kube-controller-manager's --profiling (on by default);
	// the address is loopback unless the operator chose otherwise.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errCh <- err
		}
	}()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	return errCh, nil
}
