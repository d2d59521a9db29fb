package servicelb

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/internal/controller"
)

// Controller is the service load-balancer controller.
type Controller struct {
	client   kubernetes.Interface
	services corelisters.ServiceLister
	nodes    corelisters.NodeLister
	provider Provider
	// class is the loadBalancerClass this controller serves ("" = the
	// default, services without a class).
	class    string
	queue    *controller.Queue
	recorder record.EventRecorder
	synced   []cache.InformerSynced
}

// New wires the controller to factory's informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, provider Provider, class string, recorder record.EventRecorder) *Controller {
	c := &Controller{
		client:   client,
		services: factory.Core().V1().Services().Lister(),
		nodes:    factory.Core().V1().Nodes().Lister(),
		provider: provider,
		class:    class,
		recorder: recorder,
	}
	c.queue = controller.NewQueue("service-lb", c.sync)
	svcInf := factory.Core().V1().Services().Informer()
	_, _ = svcInf.AddEventHandler(c.queue.Handler())
	nodeInf := factory.Core().V1().Nodes().Informer()
	_, _ = nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.all() },
		UpdateFunc: func(old, obj any) { c.nodeChanged(old, obj) },
		DeleteFunc: func(any) { c.all() },
	})
	c.synced = []cache.InformerSynced{svcInf.HasSynced, nodeInf.HasSynced}
	return c
}

func (c *Controller) nodeChanged(old, obj any) {
	o, n := old.(*corev1.Node), obj.(*corev1.Node)
	if controller.NodeReady(o) != controller.NodeReady(n) || !apiequality.Semantic.DeepEqual(o.Status.Addresses, n.Status.Addresses) {
		c.all()
	}
}

func (c *Controller) all() {
	svcs, _ := c.services.List(labels.Everything())
	for _, s := range svcs {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			c.queue.Add(s.Namespace + "/" + s.Name)
		}
	}
}

// Run serves until ctx ends; before the first sync the provider learns
// the load balancers that exist.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	if r, ok := c.provider.(Restorer); ok {
		svcs, _ := c.services.List(labels.Everything())
		for _, s := range svcs {
			if c.mine(s) && slices.Contains(s.Finalizers, Finalizer) {
				r.Restore(s)
			}
		}
	}
	c.queue.Run(ctx, workers)
}

// mine reports whether svc wants a load balancer from this controller.
func (c *Controller) mine(svc *corev1.Service) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	if svc.Spec.LoadBalancerClass == nil {
		return c.class == ""
	}
	return *svc.Spec.LoadBalancerClass == c.class
}

func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// With the finalizer a service never goes before its balancer; a
		// balancer of a service deleted without it is released here.
		return 0, c.provider.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
	if err != nil {
		return 0, err
	}
	hasFinalizer := slices.Contains(svc.Finalizers, Finalizer)
	if c.mine(svc) && svc.DeletionTimestamp == nil {
		return 0, c.ensure(ctx, svc, hasFinalizer)
	}
	if hasFinalizer {
		return 0, c.release(ctx, svc)
	}
	return 0, nil
}

func (c *Controller) ensure(ctx context.Context, svc *corev1.Service, hasFinalizer bool) error {
	if !hasFinalizer {
		upd := svc.DeepCopy()
		upd.Finalizers = append(upd.Finalizers, Finalizer)
		var err error
		if svc, err = c.client.CoreV1().Services(svc.Namespace).Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("add load-balancer finalizer: %w", err)
		}
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	var ready []*corev1.Node
	for _, n := range nodes {
		if controller.NodeReady(n) {
			ready = append(ready, n)
		}
	}
	first := len(svc.Status.LoadBalancer.Ingress) == 0
	if first {
		c.recorder.Event(svc, corev1.EventTypeNormal, "EnsuringLoadBalancer", "Ensuring load balancer")
	}
	ing, err := c.provider.Ensure(ctx, svc, ready)
	if err != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "SyncLoadBalancerFailed", "Error syncing load balancer: %v", err)
		return err
	}
	if apiequality.Semantic.DeepEqual(ing, svc.Status.LoadBalancer.Ingress) {
		return nil
	}
	upd := svc.DeepCopy()
	upd.Status.LoadBalancer.Ingress = ing
	if _, err := c.client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("write load-balancer status: %w", err)
	}
	c.recorder.Event(svc, corev1.EventTypeNormal, "EnsuredLoadBalancer", "Ensured load balancer")
	return nil
}

// release deletes the balancer, clears the status and lets the service go.
func (c *Controller) release(ctx context.Context, svc *corev1.Service) error {
	c.recorder.Event(svc, corev1.EventTypeNormal, "DeletingLoadBalancer", "Deleting load balancer")
	if err := c.provider.Delete(ctx, svc); err != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "DeleteLoadBalancerFailed", "Error deleting load balancer: %v", err)
		return err
	}
	if len(svc.Status.LoadBalancer.Ingress) > 0 && svc.DeletionTimestamp == nil {
		upd := svc.DeepCopy()
		upd.Status.LoadBalancer = corev1.LoadBalancerStatus{}
		var err error
		if svc, err = c.client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	upd := svc.DeepCopy()
	upd.Finalizers = slices.DeleteFunc(upd.Finalizers, func(f string) bool { return f == Finalizer })
	if _, err := c.client.CoreV1().Services(svc.Namespace).Update(ctx, upd, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove load-balancer finalizer: %w", err)
	}
	c.recorder.Event(svc, corev1.EventTypeNormal, "DeletedLoadBalancer", "Deleted load balancer")
	return nil
}
