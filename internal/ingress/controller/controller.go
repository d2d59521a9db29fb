// Package controller is `svcnet ingress`: it watches Ingresses,
// IngressClasses, Services and EndpointSlices through client-go, builds a
// routing table from the Ingresses of its class and hands it, with the
// endpoints of every backend, to the reverse proxy; it writes the
// Ingresses' status and reports what it cannot serve as events.
//
// Ingress changes rebuild the table; endpoint changes only swap the
// endpoint sets of the backends they touch. It talks to the cluster only
// through the Kubernetes API, so it runs against svcnet's API server and
// any other.
package controller

import (
	"context"
	"crypto/tls"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	ctrl "github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/ingress/gateway"
	"github.com/svcnet/svcnet/internal/ingress/proxy"
	"github.com/svcnet/svcnet/internal/ingress/route"
	"github.com/svcnet/svcnet/internal/ingress/upstream"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// Config is what the controller needs besides the API.
type Config struct {
	// Controller and ClassName select the Ingresses served (route.Classes).
	Controller string
	ClassName  string
	// PublishService names the Service whose addresses go into the
	// status of served Ingresses; empty leaves status alone.
	PublishService types.NamespacedName
	// DefaultCertificate names the Secret served to hosts without a
	// certificate of their own; SelfSigned is served when it is empty,
	// missing or invalid.
	DefaultCertificate types.NamespacedName
	SelfSigned         *tls.Certificate
	Proxy              *proxy.Proxy
	Recorder           record.EventRecorder
	Registerer         prometheus.Registerer
	Logger             *slog.Logger
	// Programmed, if set, is told the EndpointSlice version the proxy's
	// endpoint sets reflect after each sync (svcstate.Changes.SliceVersion).
	Programmed func(uint64)
	// GatewayPorts, if set, is told the proxy ports the Gateways'
	// listeners need, with their certificates, whenever they change:
	// the listeners to serve.
	GatewayPorts func(ports []gateway.ProxyPort)
}

// Controller keeps the proxy's routes and endpoints equal to the API.
type Controller struct {
	cfg     Config
	client  kubernetes.Interface
	tracker *svcstate.Tracker
	pool    *upstream.Pool

	ingresses networkinglisters.IngressLister
	classes   networkinglisters.IngressClassLister
	services  corelisters.ServiceLister
	secrets   corelisters.SecretLister
	nodes     corelisters.NodeLister // nil without a publish service
	synced    []cache.InformerSynced

	routesKick    chan struct{}
	endpointsKick chan struct{}
	statusKick    chan struct{}

	// Owned by the sync loop.
	table    *route.Table
	reported map[route.Problem]bool
	certs    certCache
	defErr   string // why the default certificate is not used, last logged

	// served is written by the sync loop and read by the status writer.
	servedMu sync.Mutex
	served   map[types.NamespacedName]bool

	metrics syncMetrics

	// gateways is set once the Gateway API is served; gwOut is the
	// routing's last build of it, for the writer.
	gateways atomic.Pointer[gatewayState]
	gwOut    gatewayOutput
	// gwPorts are the proxy ports of the Gateways, last given to
	// Config.GatewayPorts.
	gwPorts []gateway.ProxyPort
}

// New registers informers on the factories (start them afterwards):
// namespaced for Ingresses, Services and EndpointSlices, cluster-wide for
// IngressClasses and Nodes.
func New(client kubernetes.Interface, namespaced, cluster informers.SharedInformerFactory, cfg Config) *Controller {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Controller{
		cfg:           cfg,
		client:        client,
		pool:          upstream.NewPool(),
		routesKick:    make(chan struct{}, 1),
		endpointsKick: make(chan struct{}, 1),
		statusKick:    make(chan struct{}, 1),
		gwOut:         gatewayOutput{kick: make(chan struct{}, 1)},
		served:        map[types.NamespacedName]bool{},
		reported:      map[route.Problem]bool{},
		certs:         certCache{parsed: map[types.UID]parsedCert{}},
		metrics:       newSyncMetrics(cfg.Registerer),
	}
	c.tracker = svcstate.NewTracker(svcstate.Config{Logger: cfg.Logger, OnChange: func() { kick(c.endpointsKick) }})

	ingInf := namespaced.Networking().V1().Ingresses()
	classInf := cluster.Networking().V1().IngressClasses()
	svcInf := namespaced.Core().V1().Services()
	sliceInf := namespaced.Discovery().V1().EndpointSlices()
	secretInf := namespaced.Core().V1().Secrets()
	c.ingresses, c.classes, c.services, c.secrets = ingInf.Lister(), classInf.Lister(), svcInf.Lister(), secretInf.Lister()

	routes := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { kick(c.routesKick) },
		UpdateFunc: func(any, any) { kick(c.routesKick) },
		DeleteFunc: func(any) { kick(c.routesKick) },
	}
	_, _ = ingInf.Informer().AddEventHandler(routes)
	_, _ = classInf.Informer().AddEventHandler(routes)
	// Certificates are rebuilt with the routes; only TLS Secrets matter.
	_, _ = secretInf.Informer().AddEventHandler(cache.FilteringResourceEventHandler{Handler: routes, FilterFunc: func(obj any) bool {
		s, ok := ctrl.As[*corev1.Secret](obj)
		return ok && s.Type == corev1.SecretTypeTLS
	}})
	_, _ = svcInf.Informer().AddEventHandler(c.tracker.ServiceHandler())
	// A Service's coming, going and ports decide the Gateway API's
	// routes' statuses (BackendNotFound, appProtocol), and a Gateway's
	// own Service tells its ports and addresses: the Gateways are built
	// again (Ingresses refer to Services without checking them).
	_, _ = svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.kickGateways() },
		UpdateFunc: func(old, cur any) {
			o, ok1 := ctrl.As[*corev1.Service](old)
			n, ok2 := ctrl.As[*corev1.Service](cur)
			if !ok1 || !ok2 || !equality.Semantic.DeepEqual(o.Spec.Ports, n.Spec.Ports) || !equality.Semantic.DeepEqual(o.Status, n.Status) {
				c.kickGateways()
			}
		},
		DeleteFunc: func(any) { c.kickGateways() },
	})
	_, _ = sliceInf.Informer().AddEventHandler(c.tracker.EndpointSliceHandler())
	c.synced = []cache.InformerSynced{ingInf.Informer().HasSynced, classInf.Informer().HasSynced,
		svcInf.Informer().HasSynced, sliceInf.Informer().HasSynced, secretInf.Informer().HasSynced}
	if cfg.PublishService.Name != "" {
		nodeInf := cluster.Core().V1().Nodes()
		c.nodes = nodeInf.Lister()
		status := cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { kick(c.statusKick) },
			UpdateFunc: func(any, any) { kick(c.statusKick) },
			DeleteFunc: func(any) { kick(c.statusKick) },
		}
		// Only the publish Service and its slices move the addresses.
		ofPublish := func(obj any) bool {
			m, ok := ctrl.As[metav1.Object](obj)
			if !ok || m.GetNamespace() != cfg.PublishService.Namespace {
				return false
			}
			return m.GetName() == cfg.PublishService.Name || m.GetLabels()[discoveryv1.LabelServiceName] == cfg.PublishService.Name
		}
		filtered := cache.FilteringResourceEventHandler{FilterFunc: ofPublish, Handler: status}
		_, _ = nodeInf.Informer().AddEventHandler(status)
		_, _ = svcInf.Informer().AddEventHandler(filtered)
		_, _ = sliceInf.Informer().AddEventHandler(filtered)
		c.synced = append(c.synced, nodeInf.Informer().HasSynced)
	}
	return c
}

// kickGateways rebuilds the routes when the Gateway API is served.
func (c *Controller) kickGateways() {
	if c.gateways.Load() != nil {
		kick(c.routesKick)
	}
}

func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// routeWindow is how long a routes rebuild waits for more Ingress
// changes: a kubectl apply of many Ingresses costs one rebuild, and the
// promise is that a change takes effect within 50 ms.
const routeWindow = 5 * time.Millisecond

// Run syncs until ctx ends. The proxy answers 503 until the informers
// have synced and the first table is in.
func (c *Controller) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return ctx.Err()
	}
	c.syncRoutes()
	c.cfg.Logger.Info("ingress routes synced", "routes", c.table.Len(), "backends", len(c.table.Backends))
	if c.cfg.PublishService.Name != "" {
		go c.runStatus(ctx)
		kick(c.statusKick)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.endpointsKick:
			c.syncEndpoints()
		case <-c.routesKick:
			time.Sleep(routeWindow)
			select {
			case <-c.routesKick:
			default:
			}
			c.syncRoutes()
		}
	}
}

// syncEndpoints swaps the endpoint sets of the backends whose Services or
// EndpointSlices changed; the table stays.
func (c *Controller) syncEndpoints() {
	start := time.Now()
	snap, ch := c.tracker.Snapshot()
	if !ch.Empty() {
		c.pool.Update(snap, ch.Services)
		c.metrics.done("endpoints", start, ch.Earliest())
	}
	c.programmed(ch.SliceVersion)
}

// programmed reports that the proxy's endpoint sets reflect the slices
// up to version v.
func (c *Controller) programmed(v uint64) {
	if c.cfg.Programmed != nil {
		c.cfg.Programmed(v)
	}
}

// syncRoutes rebuilds the table from the Ingresses of the class.
func (c *Controller) syncRoutes() {
	start := time.Now()
	classes := route.Classes{Controller: c.cfg.Controller, Name: c.cfg.ClassName, ByName: map[string]*networkingv1.IngressClass{}}
	all, _ := c.classes.List(labels.Everything())
	for _, cl := range all {
		classes.ByName[cl.Name] = cl
	}
	ings, _ := c.ingresses.List(labels.Everything())
	var mine []*networkingv1.Ingress
	served := map[types.NamespacedName]bool{}
	for _, ing := range ings {
		if classes.Serves(ing) {
			mine = append(mine, ing)
			served[types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}] = true
		}
	}
	table, problems := route.Build(mine)
	var router route.Router = table
	if gs := c.gateways.Load(); gs != nil {
		out := c.buildGateways(gs, table.Backends)
		router = &route.Mux{Default: table, ByPort: out.ByPort, Backends: out.Backends}
		c.setGatewayOutput(out)
		c.setGatewayPorts(out)
	}
	snap, ch := c.tracker.Snapshot()
	c.pool.Update(snap, ch.Services)
	certs, certProblems := c.certificates(table, c.defaultCertificate())
	c.cfg.Proxy.Set(router, c.pool.For(router.BackendRefs(), snap))
	c.programmed(ch.SliceVersion)
	c.cfg.Proxy.SetCerts(certs)
	c.table = table
	c.report(append(problems, certProblems...))
	c.servedMu.Lock()
	changed := !maps.Equal(served, c.served)
	c.served = served
	c.servedMu.Unlock()
	if changed {
		kick(c.statusKick)
	}
	c.metrics.done("routes", start, time.Time{})
}

// defaultCertificate is the --default-ssl-certificate Secret's, else the
// self-signed one.
func (c *Controller) defaultCertificate() *tls.Certificate {
	n := c.cfg.DefaultCertificate
	if n.Name == "" {
		return c.cfg.SelfSigned
	}
	why := ""
	s, err := c.secrets.Secrets(n.Namespace).Get(n.Name)
	if err == nil {
		var cert *tls.Certificate
		if cert, err = c.certs.load(s); err == nil {
			c.defErr = ""
			return cert
		}
	}
	why = err.Error()
	if why != c.defErr {
		c.defErr = why
		c.cfg.Logger.Warn("default certificate not usable; serving a self-signed one", "secret", n.String(), "err", err)
	}
	return c.cfg.SelfSigned
}

func (c *Controller) servedSet() map[types.NamespacedName]bool {
	c.servedMu.Lock()
	defer c.servedMu.Unlock()
	return c.served
}

// report turns new problems into Warning events on their Ingresses; a
// problem already reported by the previous build is not repeated.
func (c *Controller) report(problems []route.Problem) {
	now := map[route.Problem]bool{}
	for _, p := range problems {
		now[p] = true
		if c.reported[p] || c.cfg.Recorder == nil {
			continue
		}
		ing, err := c.ingresses.Ingresses(p.Ingress.Namespace).Get(p.Ingress.Name)
		if err != nil {
			continue
		}
		c.cfg.Recorder.Event(ing, corev1.EventTypeWarning, p.Reason, p.Message)
		c.cfg.Logger.Warn("ingress not fully served", "ingress", p.Ingress.String(), "reason", p.Reason, "message", p.Message)
	}
	c.reported = now
}

// setGatewayPorts tells Config.GatewayPorts the proxy ports the
// Gateways' routers serve, when they changed.
func (c *Controller) setGatewayPorts(out *gateway.Output) {
	ports := out.ProxyPorts()
	if c.cfg.GatewayPorts == nil || gateway.Equal(ports, c.gwPorts) {
		return
	}
	c.gwPorts = ports
	c.cfg.GatewayPorts(ports)
}
