package daemonset

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/internal/controller"
)

// Controller is the DaemonSet controller.
type Controller struct {
	client   kubernetes.Interface
	sets     appslisters.DaemonSetLister
	pods     corelisters.PodLister
	nodes    corelisters.NodeLister
	queue    *controller.Queue
	recorder record.EventRecorder
	expect   *controller.Expectations
}

// New wires the controller to factory's informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *Controller {
	c := &Controller{client: client, sets: factory.Apps().V1().DaemonSets().Lister(), pods: factory.Core().V1().Pods().Lister(),
		nodes: factory.Core().V1().Nodes().Lister(), recorder: recorder, expect: controller.NewExpectations()}
	c.queue = controller.NewQueue("daemonset", c.sync)
	_, _ = factory.Apps().V1().DaemonSets().Informer().AddEventHandler(c.queue.Handler())
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(controller.OwnerHandler("apps/v1", "DaemonSet", func(key string) {
		c.expect.CreationObserved(key)
		c.queue.Add(key)
	}))
	// A node that comes, goes or changes may change where every set runs.
	all := func(any) {
		sets, _ := c.sets.List(labels.Everything())
		for _, ds := range sets {
			c.queue.Add(ds.Namespace + "/" + ds.Name)
		}
	}
	_, _ = factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: all, DeleteFunc: all,
		UpdateFunc: func(o, n any) {
			on, nn := o.(*corev1.Node), n.(*corev1.Node)
			if !apiequality.Semantic.DeepEqual(on.Labels, nn.Labels) || !apiequality.Semantic.DeepEqual(on.Spec, nn.Spec) ||
				controller.NodeReady(on) != controller.NodeReady(nn) {
				all(n)
			}
		},
	})
	return c
}

// Run syncs until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) { c.queue.Run(ctx, workers) }

func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ds, gone, err := controller.Lookup(key, c.sets.DaemonSets)
	if gone {
		c.expect.Forget(key)
		return 0, nil
	}
	if err != nil || ds.DeletionTimestamp != nil {
		return 0, err
	}
	ns := ds.Namespace
	if !c.expect.Satisfied(key) {
		return 100 * time.Millisecond, nil
	}
	owned, ok, err := controller.ControlledPods(c.pods, ns, ds.Spec.Selector, ds.UID)
	if !ok || err != nil {
		return 0, err
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return 0, err
	}
	steps := Plan(ds, nodes, owned)
	w := controller.PodWriter{Client: c.client, Recorder: c.recorder}
	failed, err := w.CreateExpected(ctx, c.expect, key, ds, steps.Create, func(p *corev1.Pod) string { return "Created pod on node " + p.Spec.NodeName })
	if err != nil {
		return 0, fmt.Errorf("create pod of %s on %s: %w", key, failed.Spec.NodeName, err)
	}
	if err := w.Delete(ctx, ds, steps.Delete, func(p *corev1.Pod) string { return "Deleted pod: " + p.Name }); err != nil {
		return 0, err
	}
	if !apiequality.Semantic.DeepEqual(ds.Status, steps.Status) {
		upd := ds.DeepCopy()
		upd.Status = steps.Status
		if _, err := c.client.AppsV1().DaemonSets(ns).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return 0, err
		}
	}
	return 0, nil
}
