package controller

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
	gatewaylisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	ctrl "github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/ingress/gateway"
)

// GatewayConfig is what the Gateway API part of the controller needs.
type GatewayConfig struct {
	// Controller is the spec.controllerName of the GatewayClasses served.
	Controller gatewayv1.GatewayController
	Logger     *slog.Logger
	// Now is the clock of condition transition times (time.Now if nil).
	Now func() time.Time
}

// GatewayClasses keeps the status of the GatewayClasses whose
// controllerName is ours; every other class is left alone.
type GatewayClasses struct {
	cfg     GatewayConfig
	client  gatewayclient.Interface
	classes gatewaylisters.GatewayClassLister
	synced  cache.InformerSynced
	queue   *ctrl.Queue
}

// NewGatewayClasses registers its informer on f (start it afterwards).
func NewGatewayClasses(client gatewayclient.Interface, f gatewayinformers.SharedInformerFactory, cfg GatewayConfig) *GatewayClasses {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g := &GatewayClasses{cfg: cfg, client: client}
	inf := f.Gateway().V1().GatewayClasses()
	g.classes, g.synced = inf.Lister(), inf.Informer().HasSynced
	g.queue = ctrl.NewQueue("gatewayclass", g.sync)
	_, _ = inf.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			gc, ok := ctrl.As[*gatewayv1.GatewayClass](obj)
			return ok && gateway.Serves(gc, cfg.Controller)
		},
		Handler: g.queue.Handler(),
	})
	return g
}

// Run syncs until ctx ends.
func (g *GatewayClasses) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), g.synced) {
		return ctx.Err()
	}
	g.queue.Run(ctx, 1)
	return nil
}

func (g *GatewayClasses) sync(ctx context.Context, name string) (time.Duration, error) {
	gc, err := g.classes.Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if !gateway.Serves(gc, g.cfg.Controller) {
		return 0, nil
	}
	status, ok := gateway.ClassStatus(gc, metav1.NewTime(g.cfg.Now()))
	if !ok || equality.Semantic.DeepEqual(status, gc.Status) {
		// Not ok: the cache is behind a status written for a newer
		// generation; the newer object's event syncs it again.
		return 0, nil
	}
	cp := gc.DeepCopy()
	cp.Status = status
	if _, err := g.client.GatewayV1().GatewayClasses().UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil {
		// A conflict is retried from the cache's next version.
		return 0, fmt.Errorf("update GatewayClass %s status: %w", name, err)
	}
	if c := meta.FindStatusCondition(status.Conditions, string(gatewayv1.GatewayClassConditionStatusAccepted)); c != nil {
		g.cfg.Logger.Info("gatewayclass status written", "gatewayclass", name, "accepted", c.Status, "reason", c.Reason)
	}
	return 0, nil
}

// resourceLister is the part of the discovery client that finds out
// whether the Gateway API is served.
type resourceLister interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// servesGatewayAPI reports whether the API server serves the Gateway
// API's GatewayClasses (its CRDs are installed and established).
func servesGatewayAPI(d resourceLister) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(gatewayv1.GroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "gatewayclasses" }), nil
}

// gatewayAPIPoll is how often the controller looks for the Gateway API's
// CRDs while they are not installed: one discovery request per replica
// every 2 s until they are, so that CRDs installed beside the controller
// (svcnet up installs them while the ingress starts) are served at once.
const gatewayAPIPoll = 2 * time.Second

// waitGatewayAPI returns once the API server serves the Gateway API,
// looking every interval, or with ctx's error. The ingress controller
// runs meanwhile: a cluster without the CRDs is an Ingress-only cluster,
// and CRDs installed after the controller started are picked up.
func waitGatewayAPI(ctx context.Context, d resourceLister, interval time.Duration, logger *slog.Logger) error {
	logged := false
	return wait.PollUntilContextCancel(ctx, interval, true, func(context.Context) (bool, error) {
		ok, err := servesGatewayAPI(d)
		if !ok && !logged {
			logged = true
			logger.Info("Gateway API not served yet; GatewayClasses are served once its CRDs are installed (svcnet manifests gateway)", "err", err)
		}
		return ok, nil
	})
}

// runGatewayAPI serves the Gateway API once the API server does, until
// ctx ends: the GatewayClasses, and with serve (when set) Gateways and
// their routes, registered on the same informer factory.
func runGatewayAPI(ctx context.Context, d resourceLister, client gatewayclient.Interface, cfg GatewayConfig, interval time.Duration,
	serve func(context.Context, gatewayinformers.SharedInformerFactory)) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := waitGatewayAPI(ctx, d, interval, cfg.Logger); err != nil {
		return nil // ctx ended
	}
	f := gatewayinformers.NewSharedInformerFactory(client, 0)
	g := NewGatewayClasses(client, f, cfg)
	if serve != nil {
		serve(ctx, f)
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	cfg.Logger.Info("gateway API served", "controller", cfg.Controller)
	return g.Run(ctx)
}
