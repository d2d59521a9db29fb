package controller

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
	gatewaylisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"github.com/svcnet/svcnet/internal/ingress/gateway"
	"github.com/svcnet/svcnet/internal/ingress/route"
)

// gatewayState is the Gateway API's objects as the informers see them,
// once the API server serves its CRDs.
type gatewayState struct {
	controller gatewayv1.GatewayController
	client     gatewayclient.Interface
	classes    gatewaylisters.GatewayClassLister
	gateways   gatewaylisters.GatewayLister
	routes     gatewaylisters.HTTPRouteLister
	grpcRoutes gatewaylisters.GRPCRouteLister
	tlsRoutes  gatewaylisters.TLSRouteLister
	grants     gatewaylisters.ReferenceGrantLister
	namespaces corelisters.NamespaceLister
}

// gatewayOutput is the last build's, for the writer.
type gatewayOutput struct {
	mu   sync.Mutex
	out  *gateway.Output
	kick chan struct{}
}

// serveGateways registers the Gateway API's informers on f (and the
// Namespaces' on a factory of its own) and, once they have synced, hands
// the routing their objects and starts the writer, which keeps the
// Gateways' Services and the statuses until ctx ends. Start f after it.
func (c *Controller) serveGateways(ctx context.Context, f gatewayinformers.SharedInformerFactory, client gatewayclient.Interface, kube kubernetes.Interface, controller gatewayv1.GatewayController) {
	kf := informers.NewSharedInformerFactory(kube, 0)
	v1 := f.Gateway().V1()
	s := &gatewayState{controller: controller, client: client,
		classes: v1.GatewayClasses().Lister(), gateways: v1.Gateways().Lister(), routes: v1.HTTPRoutes().Lister(), grpcRoutes: v1.GRPCRoutes().Lister(), tlsRoutes: v1.TLSRoutes().Lister(),
		grants: v1.ReferenceGrants().Lister(), namespaces: kf.Core().V1().Namespaces().Lister()}
	routes := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { kick(c.routesKick) },
		UpdateFunc: func(any, any) { kick(c.routesKick) },
		DeleteFunc: func(any) { kick(c.routesKick) },
	}
	synced := []cache.InformerSynced{}
	for _, inf := range []cache.SharedIndexInformer{v1.GatewayClasses().Informer(), v1.Gateways().Informer(),
		v1.HTTPRoutes().Informer(), v1.GRPCRoutes().Informer(), v1.TLSRoutes().Informer(), v1.ReferenceGrants().Informer(), kf.Core().V1().Namespaces().Informer()} {
		_, _ = inf.AddEventHandler(routes)
		synced = append(synced, inf.HasSynced)
	}
	kf.Start(ctx.Done())
	go func() {
		defer kf.Shutdown()
		if !cache.WaitForCacheSync(ctx.Done(), synced...) {
			return
		}
		c.gateways.Store(s)
		kick(c.routesKick)
		c.writeGateways(ctx, s)
	}()
}

// buildGateways compiles the Gateways and their routes beside the
// Ingress table's backends.
func (c *Controller) buildGateways(s *gatewayState, backends []route.BackendRef) *gateway.Output {
	in := gateway.Input{
		Controller: s.controller,
		Namespaces: map[string]labels.Set{},
		Infra:      c.gatewayInfra(),
		Backends:   backends,
		Now:        metav1.Now(),
		Certificate: func(ns, name string) (*tls.Certificate, error) {
			s, err := c.secrets.Secrets(ns).Get(name)
			if err != nil {
				return nil, err
			}
			return c.certs.load(s)
		},
		Service: func(ns, name string) *corev1.Service {
			svc, err := c.services.Services(ns).Get(name)
			if err != nil {
				return nil
			}
			return svc
		},
	}
	in.Classes, _ = s.classes.List(labels.Everything())
	in.Gateways, _ = s.gateways.List(labels.Everything())
	in.HTTPRoutes, _ = s.routes.List(labels.Everything())
	in.GRPCRoutes, _ = s.grpcRoutes.List(labels.Everything())
	in.TLSRoutes, _ = s.tlsRoutes.List(labels.Everything())
	in.Grants, _ = s.grants.List(labels.Everything())
	nss, _ := s.namespaces.List(labels.Everything())
	for _, ns := range nss {
		in.Namespaces[ns.Name] = labels.Set(ns.Labels)
	}
	out := gateway.Build(in)
	return &out
}

// gatewayInfra reads the Gateways' Services in the publish Service's
// namespace.
func (c *Controller) gatewayInfra() map[types.NamespacedName]gateway.Infra {
	infra := map[types.NamespacedName]gateway.Infra{}
	svcs, _ := c.services.Services(c.cfg.PublishService.Namespace).List(labels.Everything())
	for _, svc := range svcs {
		if gw, ok := gateway.Of(svc); ok {
			infra[gw] = gateway.InfraOf(svc)
		}
	}
	return infra
}

// setGatewayOutput hands a build to the writer.
func (c *Controller) setGatewayOutput(out *gateway.Output) {
	c.gwOut.mu.Lock()
	c.gwOut.out = out
	c.gwOut.mu.Unlock()
	kick(c.gwOut.kick)
}

// writeGateways keeps each served Gateway's Service and the statuses of
// the Gateways and their routes equal to the last build, retrying what
// failed every second.
func (c *Controller) writeGateways(ctx context.Context, s *gatewayState) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.gwOut.kick:
		case <-retry.C:
		}
		c.gwOut.mu.Lock()
		out := c.gwOut.out
		c.gwOut.mu.Unlock()
		if out == nil {
			continue
		}
		if err := c.writeGatewayOutput(ctx, s, out); err != nil {
			c.cfg.Logger.Warn("gateway API objects not written; retrying", "err", err)
			retry.Reset(time.Second)
		}
	}
}

func (c *Controller) writeGatewayOutput(ctx context.Context, s *gatewayState, out *gateway.Output) error {
	var errs []error
	if err := c.syncGatewayServices(ctx, out); err != nil {
		errs = append(errs, err)
	}
	v1 := s.client.GatewayV1()
	for _, g := range out.Gateways {
		errs = appendErr(errs, writeStatus(ctx, g.Gateway, g.Status, func(o *gatewayv1.Gateway) *gatewayv1.GatewayStatus { return &o.Status },
			v1.Gateways(g.Gateway.Namespace).UpdateStatus))
	}
	for _, r := range out.Routes {
		errs = appendErr(errs, writeStatus(ctx, r.Route, r.Status, func(o *gatewayv1.HTTPRoute) *gatewayv1.HTTPRouteStatus { return &o.Status },
			v1.HTTPRoutes(r.Route.Namespace).UpdateStatus))
	}
	for _, r := range out.GRPCRoutes {
		errs = appendErr(errs, writeStatus(ctx, r.Route, r.Status, func(o *gatewayv1.GRPCRoute) *gatewayv1.GRPCRouteStatus { return &o.Status },
			v1.GRPCRoutes(r.Route.Namespace).UpdateStatus))
	}
	for _, r := range out.TLSRoutes {
		errs = appendErr(errs, writeStatus(ctx, r.Route, r.Status, func(o *gatewayv1.TLSRoute) *gatewayv1.TLSRouteStatus { return &o.Status },
			v1.TLSRoutes(r.Route.Namespace).UpdateStatus))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}

// writeStatus updates an object's status to want when it differs; an
// object that is gone needs none, and one that changed since the build
// (a conflict: another replica's write, or the spec's) is built and
// written again from its event, so the conflict is not an error to
// retry.
func writeStatus[O interface {
	metav1.Object
	DeepCopy() O
}, S any](ctx context.Context, obj O, want S, status func(O) *S, update func(context.Context, O, metav1.UpdateOptions) (O, error)) error {
	if equality.Semantic.DeepEqual(want, *status(obj)) {
		return nil
	}
	cp := obj.DeepCopy()
	*status(cp) = want
	if _, err := update(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("status of %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

// syncGatewayServices makes each served Gateway's Service carry its
// listener ports and deletes the Services of Gateways that are gone.
func (c *Controller) syncGatewayServices(ctx context.Context, out *gateway.Output) error {
	ns := c.cfg.PublishService.Namespace
	publish, err := c.services.Services(ns).Get(c.cfg.PublishService.Name)
	if err != nil {
		return fmt.Errorf("publish Service %s, whose pods serve the Gateways: %w", c.cfg.PublishService, err)
	}
	have := c.gatewayInfra()
	var want []gateway.Want
	for _, g := range out.Gateways {
		want = append(want, gateway.Want{Gateway: types.NamespacedName{Namespace: g.Gateway.Namespace, Name: g.Gateway.Name}, Ports: g.Ports})
	}
	assigned := gateway.AssignPorts(want, have)
	var errs []error
	for gw, ports := range assigned {
		if len(ports) == 0 {
			delete(assigned, gw) // no listener to serve: no Service
			continue
		}
		svc := gatewayService(gw, ns, publish.Spec.Selector, ports)
		cur, err := c.services.Services(ns).Get(svc.Name)
		switch {
		case apierrors.IsNotFound(err):
			if _, err := c.client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				errs = append(errs, fmt.Errorf("create Service %s/%s: %w", ns, svc.Name, err))
			}
		case err != nil:
			errs = append(errs, err)
		case !samePorts(cur.Spec.Ports, svc.Spec.Ports) || !maps.Equal(cur.Spec.Selector, svc.Spec.Selector):
			cp := cur.DeepCopy()
			cp.Spec.Ports, cp.Spec.Selector = svc.Spec.Ports, svc.Spec.Selector
			if _, err := c.client.CoreV1().Services(ns).Update(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
				errs = append(errs, fmt.Errorf("update Service %s/%s: %w", ns, svc.Name, err))
			}
		}
	}
	for gw := range have {
		if _, ok := assigned[gw]; ok {
			continue
		}
		name := gateway.ServiceName(gw)
		if err := c.client.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete Service %s/%s: %w", ns, name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}

// gatewayService is the Service of a Gateway: a LoadBalancer with each
// listener port, sent to the proxy port assigned to it.
func gatewayService(gw types.NamespacedName, ns string, selector map[string]string, ports map[int32]int32) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: gateway.ServiceName(gw), Namespace: ns,
			Labels: map[string]string{gateway.LabelGatewayName: gw.Name, gateway.LabelGatewayNamespace: gw.Namespace}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: maps.Clone(selector)},
	}
	for _, p := range slices.Sorted(maps.Keys(ports)) {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("port-%d", p), Protocol: corev1.ProtocolTCP,
			Port: p, TargetPort: intstr.FromInt32(ports[p])})
	}
	return svc
}

// samePorts compares what gatewayService sets of the ports (the API
// server adds node ports).
func samePorts(a, b []corev1.ServicePort) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.ServicePort) bool {
		return x.Name == y.Name && x.Port == y.Port && x.Protocol == y.Protocol && x.TargetPort == y.TargetPort
	})
}
