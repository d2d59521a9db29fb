package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/informers"

	ctrl "github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/ingress/proxy"
	"github.com/svcnet/svcnet/internal/kubeclient"
)

// Run serves ingress traffic until ctx ends. Flags are checked and every
// port bound before anything watches, so a bad command line or a taken
// port fails at once with a message that names it.
func Run(ctx context.Context, o Options) error {
	c, err := o.parse()
	if err != nil {
		return err
	}
	client, _, err := kubeclient.New(c.Kubeconfig, kubeclient.Options{UserAgent: "svcnet-ingress", Protobuf: true})
	if err != nil {
		return err
	}

	var listeners []*listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	listen := func(flag, addr string) (*listener, error) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", flag, addr, err)
		}
		ll := &listener{Listener: l}
		listeners = append(listeners, ll)
		return ll, nil
	}
	httpL, err := listen("--http-address", c.HTTPAddress)
	if err != nil {
		return err
	}
	var httpsL, metricsL *listener
	if c.https {
		if httpsL, err = listen("--https-address", c.HTTPSAddress); err != nil {
			return err
		}
	}
	if c.metrics {
		if metricsL, err = listen("--metrics-address", c.MetricsAddress); err != nil {
			return err
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var accessLog io.Writer
	switch c.AccessLog {
	case "off":
	case "-":
		accessLog = os.Stdout
	default:
		f, err := os.OpenFile(c.AccessLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
		if err != nil {
			return fmt.Errorf("--access-log: %w", err)
		}
		defer f.Close()
		accessLog = f
	}
	httpsPort := 443
	if httpsL != nil {
		httpsPort = httpsL.Addr().(*net.TCPAddr).Port
	}
	px := proxy.New(proxy.Options{
		ConnectTimeout: c.ConnectTimeout,
		ReadTimeout:    c.ReadTimeout,
		MaxBodyBytes:   c.bodyLimit,
		AccessLog:      accessLog,
		Registerer:     reg,
		HTTPSPort:      httpsPort,
	})
	defer px.Close()
	selfSigned, err := proxy.SelfSigned()
	if err != nil {
		return err
	}
	px.SetCerts(proxy.NewCerts(selfSigned))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var nsOpts []informers.SharedInformerOption
	if c.WatchNamespace != "" {
		nsOpts = append(nsOpts, informers.WithNamespace(c.WatchNamespace))
	}
	namespaced := informers.NewSharedInformerFactoryWithOptions(client, 0, nsOpts...)
	cluster := namespaced
	if c.WatchNamespace != "" {
		cluster = informers.NewSharedInformerFactory(client, 0)
	}
	ctl := New(client, namespaced, cluster, Config{
		Controller:         c.ControllerClass,
		ClassName:          c.IngressClass,
		PublishService:     c.publish,
		DefaultCertificate: c.defaultCert,
		SelfSigned:         selfSigned,
		Proxy:              px,
		Recorder:           ctrl.NewRecorder(ctx, client, "svcnet-ingress"),
		Registerer:         reg,
	})

	errCh := make(chan error, 4)
	var servers []*http.Server
	serve := func(l *listener, h http.Handler, tlsOn bool) {
		srv := &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       75 * time.Second, // nginx's keepalive_timeout
			MaxHeaderBytes:    32 << 10,         // more gets 431
			ErrorLog:          log.New(io.Discard, "", 0),
			ConnContext:       l.connContext,
		}
		protocols := new(http.Protocols)
		protocols.SetHTTP1(true)
		if tlsOn {
			srv.TLSConfig = px.TLSConfig()
			protocols.SetHTTP2(true)
		} else if h != nil && l != metricsL {
			// gRPC clients without TLS speak HTTP/2 from the first byte.
			protocols.SetUnencryptedHTTP2(true)
		}
		srv.Protocols = protocols
		servers = append(servers, srv)
		go func() {
			var err error
			if tlsOn {
				err = srv.ServeTLS(l, "", "")
			} else {
				err = srv.Serve(l)
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				errCh <- err
			}
		}()
	}
	limit := &connLimit{max: int64(c.MaxConnections)}
	httpL.limit = limit
	serve(httpL, limited(px.Handler(httpL.Addr().(*net.TCPAddr).Port)), false)
	if httpsL != nil {
		httpsL.limit = limit
		serve(httpsL, limited(px.Handler(httpsPort)), true)
	}
	if metricsL != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		if c.Profiling {
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !px.Ready() {
				http.Error(w, "routes not synced yet", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
		serve(metricsL, mux, false)
	}
	addr := func(l *listener) string {
		if l == nil {
			return ""
		}
		return l.Addr().String()
	}
	slog.Info("ingress starting", "http", addr(httpL), "https", addr(httpsL), "metrics", addr(metricsL),
		"class", c.IngressClass, "controller", c.ControllerClass, "namespace", c.WatchNamespace, "publishService", c.PublishService)

	synced := make(chan error, 1)
	go func() { synced <- ctl.Run(ctx) }()
	namespaced.Start(ctx.Done())
	cluster.Start(ctx.Done())
	defer namespaced.Shutdown()
	defer cluster.Shutdown()

	select {
	case <-ctx.Done():
		err = nil
	case err = <-errCh:
	case err = <-synced:
	}
	cancel()
	// In-flight requests finish; long-lived ones get a few seconds.
	shutdownCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	for _, s := range servers {
		_ = s.Shutdown(shutdownCtx)
	}
	return err
}
