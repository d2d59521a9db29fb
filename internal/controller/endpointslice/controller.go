// Package endpointslice keeps, for every Service with a selector, the
// discovery.k8s.io/v1 EndpointSlices that list its pods, as
// kube-controller-manager's EndpointSlice controller does: ready, serving
// and terminating conditions, named target ports resolved per pod, at most
// MaxPerSlice endpoints per slice, edits in place, no write when nothing
// changed.
package endpointslice

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/podselector"
)

// Controller is the EndpointSlice controller.
type Controller struct {
	client      kubernetes.Interface
	services    corelisters.ServiceLister
	nodes       corelisters.NodeLister
	slices      discoverylisters.EndpointSliceLister
	queue       *controller.Queue
	maxPerSlice int
	selected    *podselector.Index

	mu       sync.Mutex
	triggers map[string]time.Time // service key -> earliest unsynced change
	written  *Tracker
}

// New wires the controller to factory's informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, maxPerSlice int) *Controller {
	c := &Controller{
		client:      client,
		services:    factory.Core().V1().Services().Lister(),
		nodes:       factory.Core().V1().Nodes().Lister(),
		slices:      factory.Discovery().V1().EndpointSlices().Lister(),
		maxPerSlice: maxPerSlice,
		triggers:    map[string]time.Time{},
		selected:    podselector.New(factory.Core().V1().Pods().Lister()),
		written:     NewTracker(),
	}
	c.queue = controller.NewQueue("endpointslice", c.sync)
	// Registering on a new informer cannot fail (it fails only once the
	// informer has stopped).
	_ = c.selected.Register(factory.Core().V1().Services().Informer(), factory.Core().V1().Pods().Informer(), c.trigger)
	_, _ = factory.Discovery().V1().EndpointSlices().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueueSlice(obj) },
		UpdateFunc: func(_, obj any) { c.enqueueSlice(obj) },
		DeleteFunc: func(obj any) { c.enqueueSlice(obj) },
	})
	_ = factory.Core().V1().Nodes().Informer()
	return c
}

// Run syncs services until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	// Not before the index has every pod: see podselector.HasSynced.
	if !cache.WaitForCacheSync(ctx.Done(), c.selected.HasSynced) {
		return
	}
	c.queue.Run(ctx, workers)
}

// trigger notes a change of service key and queues it.
func (c *Controller) trigger(key string) {
	c.mu.Lock()
	if _, pending := c.triggers[key]; !pending {
		c.triggers[key] = time.Now()
	}
	c.mu.Unlock()
	c.queue.Add(key)
}

func (c *Controller) enqueueSlice(obj any) {
	s, ok := controller.As[*discoveryv1.EndpointSlice](obj)
	if !ok || s.Labels[discoveryv1.LabelManagedBy] != ManagedBy || s.Labels[discoveryv1.LabelServiceName] == "" {
		return
	}
	c.queue.Add(s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName])
}

func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && (svc.Spec.Selector == nil || svc.Spec.Type == corev1.ServiceTypeExternalName)) {
		// Owner references let the garbage collector remove the slices of
		// a deleted service; a service without selector is left alone.
		c.forget(key)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	existing, err := c.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ManagedBy}))
	if err != nil {
		return 0, err
	}
	if c.written.Stale(key, existing) {
		// Our own last writes are not in the cache yet; acting now could
		// create duplicates.
		return 100 * time.Millisecond, nil
	}
	pods := c.selected.Pods(ns, name)
	c.mu.Lock()
	trigger := c.triggers[key]
	delete(c.triggers, key)
	c.mu.Unlock()
	plan := Reconcile(Input{Service: svc, Pods: pods, Zone: c.zone, Existing: existing,
		MaxPerSlice: c.maxPerSlice, TriggerTime: trigger})
	if plan.Empty() {
		return 0, nil
	}
	if err := c.apply(ctx, key, plan); err != nil {
		c.mu.Lock()
		if t, ok := c.triggers[key]; !ok || trigger.Before(t) {
			c.triggers[key] = trigger
		}
		c.mu.Unlock()
		return 0, fmt.Errorf("endpoint slices of %s: %w", key, err)
	}
	slog.Debug("endpoint slices synced", "service", key, "created", len(plan.Create), "updated", len(plan.Update), "deleted", len(plan.Delete))
	return 0, nil
}

// apply writes a plan as Kubernetes' reconciler does: creates, then
// updates, then deletes, so that an endpoint moving between slices is
// never in none of them.
func (c *Controller) apply(ctx context.Context, key string, plan Plan) error {
	for _, s := range plan.Create {
		out, err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		c.written.Record(key, out.Name, out.Generation)
	}
	for _, s := range plan.Update {
		out, err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		c.written.Record(key, out.Name, out.Generation)
	}
	for _, s := range plan.Delete {
		err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		c.written.Record(key, s.Name, -1)
	}
	return nil
}

func (c *Controller) forget(key string) {
	c.written.Forget(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.triggers, key)
}

func (c *Controller) zone(node string) string {
	n, err := c.nodes.Get(node)
	if err != nil {
		return ""
	}
	return n.Labels[corev1.LabelTopologyZone]
}
