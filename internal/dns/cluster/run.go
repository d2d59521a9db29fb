// Package cluster is `svcnet dns` as a component: it watches Services,
// EndpointSlices and (when needed) Pods through client-go, rebuilds the
// zone index on each change and swaps it into the DNS server, forwards
// other names upstream, and serves /metrics, /healthz and /readyz.
//
// It talks to the cluster only through the Kubernetes API, so it runs
// against svcnet's API server and against any other.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/informers"

	"github.com/svcnet/svcnet/internal/dns/forward"
	"github.com/svcnet/svcnet/internal/dns/index"
	"github.com/svcnet/svcnet/internal/dns/resolver"
	"github.com/svcnet/svcnet/internal/dns/server"
	"github.com/svcnet/svcnet/internal/kubeclient"
)

// Run serves DNS until ctx ends. Flags are checked first, and the DNS and
// HTTP ports are bound before anything watches, so a bad command line or
// a taken port fails at once with a message that names it.
func Run(ctx context.Context, o Options) error {
	c, err := o.parse()
	if err != nil {
		return err
	}
	// Protobuf: a relist of 10,000 Services is the biggest thing this
	// process ever parses.
	client, _, err := kubeclient.New(c.Kubeconfig, kubeclient.Options{UserAgent: "svcnet-dns", Protobuf: true})
	if err != nil {
		return err
	}

	if c.fromResolv {
		for _, u := range c.upstreams {
			if ap, err := netip.ParseAddrPort(u); err == nil && ap.Addr().IsLoopback() {
				// A node-local stub (systemd-resolved's 127.0.0.53, say) is
				// out of reach from a pod's network namespace.
				slog.Warn("upstream from resolv.conf is a loopback address: in a pod's network namespace that is the pod itself; give --upstream",
					"upstream", u, "resolvConf", c.ResolvConf)
			}
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var upstream server.Upstream
	var router *forward.Router
	if !c.noUpstream || len(c.stubs) > 0 || c.ConfigMap != "" {
		routes, _ := c.routes(nil)
		if router, err = forward.NewRouter(forward.Options{Registerer: reg}, routes); err != nil {
			return err
		}
		defer router.Close()
		upstream = router
	}
	srv, err := server.New(server.Options{
		Zone:       c.zone,
		Upstream:   upstream,
		Registerer: reg,
		QueryLog:   c.QueryLog,
		Resolver:   resolver.Config{Autopath: c.Autopath, HostSearch: c.hostSearch},
	})
	if err != nil {
		return err
	}

	factory := informers.NewSharedInformerFactory(client, 0)
	syncer, err := NewSyncer(factory, SyncOptions{
		Index: index.Options{
			Zone: c.zone, TTL: c.ttl, Pods: c.pods, ReverseCIDRs: c.reverse,
		},
		WatchPods:  c.pods == index.PodsVerified || c.Autopath,
		Registerer: reg,
	}, srv.SetIndex)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	httpErr, err := ServeHTTP(ctx, c.MetricsBindAddress, c.HealthBindAddress, c.Profiling, reg, srv.Ready)
	if err != nil {
		return err
	}
	if err := srv.Listen(c.Listen); err != nil {
		return err
	}
	slog.Info("DNS starting", "listen", srv.Addr(), "zone", c.zone, "upstreams", c.upstreams, "stubDomains", c.stubs, "configMap", c.ConfigMap, "pods", c.pods,
		"ttl", c.ttl, "autopath", c.Autopath, "hostSearch", c.hostSearch)

	if c.ConfigMap != "" {
		shutdown, err := c.followConfigMap(client, router, ctx.Done())
		if err != nil {
			return err
		}
		defer shutdown()
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	synced := make(chan error, 1)
	go func() { synced <- syncer.Run(ctx) }()
	factory.Start(ctx.Done())
	defer factory.Shutdown()

	select {
	case <-ctx.Done():
		err = nil
	case err = <-httpErr:
	case err = <-synced:
	case err = <-served:
	}
	cancel()
	<-served
	return err
}

// ServeHTTP serves /metrics (and pprof when profiling) on one address and
// the probes on another, or everything on one listener when the
// addresses are equal.
func ServeHTTP(ctx context.Context, metricsAddr, healthAddr string, profiling bool, reg *prometheus.Registry, ready func() bool) (<-chan error, error) {
	errCh := make(chan error, 2)
	off := func(a string) bool { return a == "" || a == "0" }
	metrics := http.NewServeMux()
	metrics.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if profiling {
		metrics.HandleFunc("/debug/pprof/", pprof.Index)
		metrics.HandleFunc("/debug/pprof/profile", pprof.Profile)
		metrics.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	health := metrics
	if metricsAddr != healthAddr || off(metricsAddr) {
		health = http.NewServeMux()
	}
	health.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	// Ready once the zone comes from synced informers: a replica that
	// is still listing must get no traffic, since it would SERVFAIL.
	health.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "zone not synced yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})

	var listeners []struct {
		l net.Listener
		h http.Handler
	}
	add := func(flag, addr string, h http.Handler) error {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("%s %s: %w", flag, addr, err)
		}
		listeners = append(listeners, struct {
			l net.Listener
			h http.Handler
		}{l, h})
		return nil
	}
	var err error
	if !off(metricsAddr) {
		err = add("--metrics-bind-address", metricsAddr, metrics)
	}
	if err == nil && !off(healthAddr) && health != metrics {
		err = add("--health-bind-address", healthAddr, health)
	}
	if err != nil {
		for _, l := range listeners {
			l.l.Close()
		}
		return nil, err
	}
	for _, l := range listeners {
		srv := &http.Server{Handler: l.h, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(l.l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errCh <- err
			}
		}()
		go func() { <-ctx.Done(); _ = srv.Close() }()
		slog.Info("DNS HTTP endpoints", "addr", l.l.Addr().String())
	}
	return errCh, nil
}
