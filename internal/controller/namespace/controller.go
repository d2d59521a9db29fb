// Package namespace empties terminating namespaces, like kube-controller-
// manager's namespace controller: it deletes everything in the namespace,
// waits until it is gone, then clears the "kubernetes" finalizer so the
// API server removes the namespace.
package namespace

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/controller"
)

// finalizer is the spec finalizer this controller owns.
const finalizer corev1.FinalizerName = "kubernetes"

// Controller empties and finalizes terminating namespaces.
type Controller struct {
	client    kubernetes.Interface
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	lister    cache.Indexer
	queue     *controller.Queue
}

// New watches namespaces through factory.
func New(client kubernetes.Interface, meta metadata.Interface, factory informers.SharedInformerFactory) *Controller {
	c := &Controller{client: client, metadata: meta, discovery: client.Discovery()}
	c.queue = controller.NewQueue("namespace", c.sync)
	inf := factory.Core().V1().Namespaces().Informer()
	c.lister = inf.GetIndexer()
	enqueue := func(obj any) {
		if ns, ok := obj.(*corev1.Namespace); ok && ns.DeletionTimestamp != nil {
			c.queue.Add(ns.Name)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	return c
}

// Run processes namespaces until ctx ends.
func (c *Controller) Run(ctx context.Context) { c.queue.Run(ctx, 2) }

func (c *Controller) sync(ctx context.Context, name string) (time.Duration, error) {
	obj, exists, err := c.lister.GetByKey(name)
	if err != nil || !exists {
		return 0, err
	}
	ns := obj.(*corev1.Namespace)
	if ns.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, finalizer) {
		return 0, nil
	}
	remaining, err := c.deleteContent(ctx, name)
	if err != nil {
		return 0, err
	}
	if remaining > 0 {
		// Graceful deletions and finalizers take their time; look again.
		return time.Second, nil
	}
	ns = ns.DeepCopy()
	ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == finalizer })
	_, err = c.client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err == nil {
		slog.Info("namespace emptied and finalized", "namespace", name)
	}
	return 0, err
}

// deleteContent deletes every namespaced object in ns and returns how many
// are still there.
func (c *Controller) deleteContent(ctx context.Context, ns string) (int, error) {
	lists, err := c.discovery.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return 0, fmt.Errorf("discover namespaced resources: %w", err)
	}
	remaining := 0
	background := metav1.DeletePropagationBackground
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if !slices.Contains(r.Verbs, "deletecollection") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			client := c.metadata.Resource(gv.WithResource(r.Name)).Namespace(ns)
			err := client.DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &background}, metav1.ListOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return 0, fmt.Errorf("delete %s in %s: %w", r.Name, ns, err)
			}
			left, err := client.List(ctx, metav1.ListOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return 0, fmt.Errorf("list %s in %s: %w", r.Name, ns, err)
			}
			if left != nil {
				remaining += len(left.Items)
			}
		}
	}
	return remaining, nil
}
