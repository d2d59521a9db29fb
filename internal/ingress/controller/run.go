package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

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
	ports, err := bind(c)
	if err != nil {
		return err
	}
	defer ports.Close()
	accessLog, closeLog, err := openAccessLog(c.AccessLog)
	if err != nil {
		return err
	}
	defer closeLog()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	px := proxy.New(proxy.Options{
		ConnectTimeout: c.ConnectTimeout,
		ReadTimeout:    c.ReadTimeout,
		MaxBodyBytes:   c.bodyLimit,
		AccessLog:      accessLog,
		Registerer:     reg,
		HTTPSPort:      ports.httpsPort(),
		EventLoops:     c.EventLoops,
	})
	defer px.Close()
	selfSigned, err := proxy.SelfSigned()
	if err != nil {
		return err
	}
	px.SetCerts(proxy.NewCerts(selfSigned))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	namespaced, cluster := factories(client, c.WatchNamespace)
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

	srv := servers{errs: make(chan error, 4)}
	limit := &connLimit{max: int64(c.MaxConnections)}
	ports.http.limit = limit
	// gRPC clients without TLS speak HTTP/2 from the first byte.
	srv.serve(ports.http, limited(px.Handler(ports.http.port())), nil, true, px)
	if ports.https != nil {
		ports.https.limit = limit
		srv.serve(ports.https, limited(px.Handler(ports.httpsPort())), px.TLSConfig(), false, nil)
	}
	if ports.metrics != nil {
		srv.serve(ports.metrics, metricsMux(reg, c.Profiling, px.Ready), nil, false, nil)
	}
	slog.Info("ingress starting", "http", ports.http.String(), "https", ports.https.String(), "metrics", ports.metrics.String(),
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
	case err = <-srv.errs:
	case err = <-synced:
	}
	cancel()
	srv.shutdown()
	return err
}

// ports are the listeners, bound before anything else starts.
type ports struct{ http, https, metrics *listener }

func bind(c *config) (*ports, error) {
	p := &ports{}
	listen := func(flag, addr string) (*listener, error) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("%s %s: %w", flag, addr, err)
		}
		return &listener{Listener: l}, nil
	}
	var err error
	if p.http, err = listen("--http-address", c.HTTPAddress); err != nil {
		return nil, err
	}
	if c.https {
		if p.https, err = listen("--https-address", c.HTTPSAddress); err != nil {
			return nil, err
		}
	}
	if c.metrics {
		if p.metrics, err = listen("--metrics-address", c.MetricsAddress); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *ports) Close() {
	for _, l := range []*listener{p.http, p.https, p.metrics} {
		if l != nil {
			l.Close()
		}
	}
}

// httpsPort is where HTTPS is served, for redirects.
func (p *ports) httpsPort() int {
	if p.https == nil {
		return 443
	}
	return p.https.port()
}

// openAccessLog opens --access-log: "-" is stdout, "off" nothing.
func openAccessLog(where string) (io.Writer, func(), error) {
	switch where {
	case "off":
		return nil, func() {}, nil
	case "-":
		return os.Stdout, func() {}, nil
	}
	f, err := os.OpenFile(where, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, nil, fmt.Errorf("--access-log: %w", err)
	}
	return f, func() { f.Close() }, nil
}

// factories are the informer factories: namespaced ones for what
// --watch-namespace limits, cluster-wide ones for IngressClasses and Nodes.
func factories(client kubernetes.Interface, namespace string) (namespaced, cluster informers.SharedInformerFactory) {
	if namespace == "" {
		f := informers.NewSharedInformerFactory(client, 0)
		return f, f
	}
	return informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace)),
		informers.NewSharedInformerFactory(client, 0)
}

// metricsMux serves /metrics, the probes, and /debug/pprof when asked.
func metricsMux(reg *prometheus.Registry, profiling bool, ready func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "routes not synced yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

// servers are the HTTP servers of the listeners; errs receives the first
// failure of any.
type servers struct {
	list []*http.Server
	fast []*fastServer
	errs chan error
}

// headerTimeout bounds the wait for a request's headers (and for the
// first bytes that tell HTTP/1 from HTTP/2 without TLS).
const headerTimeout = 10 * time.Second

// idleTimeout closes a kept-alive client connection without a request,
// as nginx's keepalive_timeout.
const idleTimeout = 75 * time.Second

// serve serves h on l: over TLS when tlsConfig is set (with HTTP/2), else
// plain HTTP/1.1, and HTTP/2 without TLS too when h2c (on connections
// splitH2C sorts out, each side its own server). With fast, plain
// HTTP/1.1 goes through its fast path first.
func (s *servers) serve(l *listener, h http.Handler, tlsConfig *tls.Config, h2c bool, fast *proxy.Proxy) {
	newServer := func(http1, http2, unencrypted bool) *http.Server {
		srv := &http.Server{
			Handler:           h,
			ReadHeaderTimeout: headerTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    32 << 10, // more gets 431
			ErrorLog:          log.New(io.Discard, "", 0),
			ConnContext:       l.connContext,
			TLSConfig:         tlsConfig,
			Protocols:         new(http.Protocols),
		}
		srv.Protocols.SetHTTP1(http1)
		srv.Protocols.SetHTTP2(http2)
		srv.Protocols.SetUnencryptedHTTP2(unencrypted)
		s.list = append(s.list, srv)
		return srv
	}
	run := func(srv *http.Server, l net.Listener) {
		go func() {
			var err error
			if tlsConfig != nil {
				err = srv.ServeTLS(l, "", "")
			} else {
				err = srv.Serve(l)
			}
			// net.ErrClosed: the other side of a split shut the
			// listener both share.
			if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
				s.errs <- err
			}
		}()
	}
	h1 := net.Listener(l)
	if h2c {
		var h2 net.Listener
		h1, h2 = splitH2C(l, headerTimeout)
		run(newServer(false, false, true), h2)
	}
	if fast == nil || tlsConfig != nil {
		run(newServer(true, tlsConfig != nil, false), h1)
		return
	}
	fs := newFastServer(fast, h1, l.port(), proxy.ConnTimeouts{Header: headerTimeout, Idle: idleTimeout})
	s.fast = append(s.fast, fs)
	go func() {
		if err := fs.serve(); err != nil && !errors.Is(err, net.ErrClosed) {
			s.errs <- err
		}
	}()
	run(newServer(true, false, false), fs.handed)
}

// shutdown lets requests in flight finish; long-lived ones get a few
// seconds.
func (s *servers) shutdown() {
	ctx, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	var wg sync.WaitGroup
	for _, srv := range s.list {
		wg.Go(func() { _ = srv.Shutdown(ctx) }) // each gets the whole grace
	}
	for _, fs := range s.fast {
		wg.Go(func() { fs.shutdown(ctx) })
	}
	wg.Wait()
}
