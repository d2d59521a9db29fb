package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	ctrl "github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/ingress/gateway"
	"github.com/svcnet/svcnet/internal/ingress/proxy"
	"github.com/svcnet/svcnet/internal/ingress/server"
	"github.com/svcnet/svcnet/internal/kubeclient"
	"github.com/svcnet/svcnet/internal/programmed"
)

// Run serves ingress traffic until ctx ends. Flags are checked and every
// port bound before anything watches, so a bad command line or a taken
// port fails at once with a message that names it.
func Run(ctx context.Context, o Options) error {
	c, err := o.parse()
	if err != nil {
		return err
	}
	client, restConfig, err := kubeclient.New(c.Kubeconfig, kubeclient.Options{UserAgent: "svcnet-ingress", Protobuf: true,
		QPS: c.KubeAPIQPS, Burst: c.KubeAPIBurst})
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
		SendTimeout:    c.SendTimeout,
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
	publisher := programmedPublisher(client, c.Options, px.Ready)
	namespaced, cluster := factories(client, c.WatchNamespace)
	srv := server.New()
	limit := server.NewLimit(c.MaxConnections)
	gwListeners := &gatewayListeners{srv: srv, px: px, limit: limit, bound: map[int]*gatewayListener{}}
	defer gwListeners.close()
	ctl := New(client, namespaced, cluster, Config{
		Controller:         c.ControllerClass,
		ClassName:          c.IngressClass,
		PublishService:     c.publish,
		DefaultCertificate: c.defaultCert,
		SelfSigned:         selfSigned,
		Proxy:              px,
		Recorder:           ctrl.NewRecorder(ctx, client, "svcnet-ingress"),
		Registerer:         reg,
		Programmed:         publisher.Set,
		GatewayPorts:       gwListeners.set,
	})
	published := make(chan struct{})
	go func() { publisher.Run(ctx); close(published) }()

	ports.http.Limit = limit
	// gRPC clients without TLS speak HTTP/2 from the first byte.
	srv.Serve(ports.http, px.Handler(ports.http.Port()), nil, true, px)
	if ports.https != nil {
		ports.https.Limit = limit
		srv.Serve(ports.https, px.Handler(ports.httpsPort()), px.TLSConfig(), false, px)
	}
	if ports.metrics != nil {
		srv.Serve(ports.metrics, metricsMux(reg, c.Profiling, px.Ready), nil, false, nil)
	}
	slog.Info("ingress starting", "http", ports.http.String(), "https", ports.https.String(), "metrics", ports.metrics.String(),
		"class", c.IngressClass, "controller", c.ControllerClass, "gatewayController", c.GatewayController, "namespace", c.WatchNamespace, "publishService", c.PublishService)

	synced := make(chan error, 1)
	go func() { synced <- ctl.Run(ctx) }()
	if c.GatewayController != "" {
		// Custom resources have no protobuf encoding.
		gwConfig := rest.CopyConfig(restConfig)
		gwConfig.ContentType, gwConfig.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
		gwClient, err := gatewayclient.NewForConfig(gwConfig)
		if err != nil {
			return err
		}
		go func() {
			var serve func(context.Context, gatewayinformers.SharedInformerFactory)
			if c.publish.Name != "" {
				serve = func(ctx context.Context, f gatewayinformers.SharedInformerFactory) {
					ctl.serveGateways(ctx, f, gwClient, client, gatewayv1.GatewayController(c.GatewayController))
				}
			}
			err := runGatewayAPI(ctx, client.Discovery(), gwClient, GatewayConfig{Controller: gatewayv1.GatewayController(c.GatewayController)}, gatewayAPIPoll, serve)
			if err != nil {
				slog.Error("gateway API controller stopped", "err", err)
			}
		}()
	}
	namespaced.Start(ctx.Done())
	cluster.Start(ctx.Done())
	defer namespaced.Shutdown()
	defer cluster.Shutdown()

	select {
	case <-ctx.Done():
		err = nil
	case err = <-srv.Errs():
	case err = <-synced:
	}
	cancel()
	srv.Shutdown()
	<-published // its Lease is gone: nothing routes through this replica
	return err
}

// programmedPublisher keeps the replica's Lease of what its endpoint
// sets reflect, when it watches every namespace (a node agent waits for
// every live Lease, so one that sees only some namespaces' slices would
// hold the others' pods to their limit), else it is a no-op.
func programmedPublisher(client kubernetes.Interface, o Options, ready func() bool) *programmed.Publisher {
	if !o.PublishProgrammed || o.WatchNamespace != "" {
		return nil
	}
	holder := os.Getenv("POD_NAME")
	if holder == "" {
		h, _ := os.Hostname()
		holder = strings.ToLower(h)
	}
	return programmed.NewPublisher(programmed.PublisherConfig{Client: client, Kind: "ingress", Holder: holder,
		Namespace: os.Getenv("POD_NAMESPACE"), Healthy: ready, DeleteOnStop: true})
}

// ports are the listeners, bound before anything else starts.
type ports struct{ http, https, metrics *server.Listener }

func bind(c *config) (*ports, error) {
	p := &ports{}
	listen := func(flag, addr string) (*server.Listener, error) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("%s %s: %w", flag, addr, err)
		}
		return &server.Listener{Listener: l}, nil
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
	for _, l := range []*server.Listener{p.http, p.https, p.metrics} {
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
	return p.https.Port()
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

// gatewayListeners are the proxy ports the Gateways' listeners are
// served on, bound and closed as Gateways come and go; an HTTPS port's
// certificates change without a new listener.
type gatewayListeners struct {
	srv   *server.Servers
	px    *proxy.Proxy
	limit *server.Limit
	mu    sync.Mutex
	bound map[int]*gatewayListener
}

type gatewayListener struct {
	l      *server.Listener
	mode   string // "http", "https" or "stream"
	certs  atomic.Pointer[[]gateway.TLSCert]
	stream atomic.Pointer[[]gateway.TLSCert]
}

func modeOf(p gateway.ProxyPort) string {
	switch {
	case len(p.Stream) > 0:
		return "stream"
	case len(p.TLS) > 0:
		return "https"
	}
	return "http"
}

// set serves exactly these ports. A port that cannot be bound is
// logged and tried again at the next change.
func (g *gatewayListeners) set(ports []gateway.ProxyPort) {
	g.mu.Lock()
	defer g.mu.Unlock()
	want := map[int]bool{}
	for _, p := range ports {
		mode := modeOf(p)
		if b := g.bound[p.Port]; b != nil && b.mode != mode {
			g.unbind(p.Port) // the port changed protocol
		}
		want[p.Port] = true
		if b := g.bound[p.Port]; b != nil {
			b.certs.Store(&p.TLS)
			b.stream.Store(&p.Stream)
			continue
		}
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p.Port))
		if err != nil {
			slog.Error("gateway listener not served", "port", p.Port, "err", err)
			continue
		}
		b := &gatewayListener{l: &server.Listener{Listener: l, Limit: g.limit}, mode: mode}
		b.certs.Store(&p.TLS)
		b.stream.Store(&p.Stream)
		g.bound[p.Port] = b
		switch mode {
		case "stream":
			go func() {
				if err := g.px.ServeStream(b.l, p.Port, b.pickStream); !errors.Is(err, net.ErrClosed) {
					slog.Error("gateway TLS listener stopped", "port", p.Port, "err", err)
				}
			}()
		case "https":
			g.srv.Serve(b.l, g.px.Handler(p.Port), b.tlsConfig(), false, g.px)
		default:
			// gRPC clients without TLS speak HTTP/2 from the first byte.
			g.srv.Serve(b.l, g.px.Handler(p.Port), nil, true, g.px)
		}
		slog.Info("gateway listener served", "port", p.Port, "mode", mode)
	}
	for p := range g.bound {
		if !want[p] {
			g.unbind(p)
		}
	}
}

func (g *gatewayListeners) unbind(port int) {
	g.bound[port].l.Close()
	delete(g.bound, port)
	slog.Info("gateway listener closed", "port", port)
}

// tlsConfig picks an HTTPS port's certificate by SNI among its
// listeners' (gateway.Pick).
func (b *gatewayListener) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := gateway.Pick(*b.certs.Load(), hello.ServerName); c != nil {
				return c, nil
			}
			return nil, fmt.Errorf("no certificate for %q", hello.ServerName)
		},
	}
}

// pickStream is a stream port's listener for a TLS server name.
func (b *gatewayListener) pickStream(serverName string) (*tls.Certificate, bool) {
	return gateway.PickListener(*b.stream.Load(), serverName)
}

func (g *gatewayListeners) close() {
	g.set(nil)
}
