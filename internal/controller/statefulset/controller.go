package statefulset

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/internal/controller"
)

// Controller is the StatefulSet controller.
type Controller struct {
	client   kubernetes.Interface
	sets     appslisters.StatefulSetLister
	pods     corelisters.PodLister
	queue    *controller.Queue
	recorder record.EventRecorder
}

// New wires the controller to factory's informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *Controller {
	c := &Controller{client: client, sets: factory.Apps().V1().StatefulSets().Lister(),
		pods: factory.Core().V1().Pods().Lister(), recorder: recorder}
	c.queue = controller.NewQueue("statefulset", c.sync)
	_, _ = factory.Apps().V1().StatefulSets().Informer().AddEventHandler(c.queue.Handler())
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(controller.OwnerHandler("apps/v1", "StatefulSet", c.queue.Add))
	return c
}

// Run syncs until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) { c.queue.Run(ctx, workers) }

func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	set, gone, err := controller.Lookup(key, c.sets.StatefulSets)
	if gone || err != nil || set.DeletionTimestamp != nil {
		return 0, err // the garbage collector removes the pods of a gone set
	}
	ns := set.Namespace
	owned, ok, err := controller.ControlledPods(c.pods, ns, set.Spec.Selector, set.UID)
	if !ok || err != nil {
		return 0, err
	}
	steps := Plan(set, owned)
	for _, p := range steps.Create {
		if _, err := c.client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return 100 * time.Millisecond, nil // the cache is behind
			}
			c.recorder.Eventf(set, corev1.EventTypeWarning, "FailedCreate", "create Pod %s in StatefulSet %s failed error: %v", p.Name, set.Name, err)
			return 0, fmt.Errorf("create pod %s: %w", p.Name, err)
		}
		c.recorder.Eventf(set, corev1.EventTypeNormal, "SuccessfulCreate", "create Pod %s in StatefulSet %s successful", p.Name, set.Name)
	}
	w := controller.PodWriter{Client: c.client, Recorder: c.recorder}
	if err := w.Delete(ctx, set, steps.Delete, func(p *corev1.Pod) string {
		return fmt.Sprintf("delete Pod %s in StatefulSet %s successful", p.Name, set.Name)
	}); err != nil {
		return 0, err
	}
	if !apiequality.Semantic.DeepEqual(set.Status, steps.Status) {
		upd := set.DeepCopy()
		upd.Status = steps.Status
		if _, err := c.client.AppsV1().StatefulSets(ns).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return 0, err
		}
	}
	return 0, nil
}
