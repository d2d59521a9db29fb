//lint:file-ignore SA1019 the v1 Endpoints API is deprecated in Kubernetes 1.33 but still served and kept

package endpoints

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
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/podselector"
)

// Controller is the Endpoints controller.
type Controller struct {
	client    kubernetes.Interface
	services  corelisters.ServiceLister
	endpoints corelisters.EndpointsLister
	queue     *controller.Queue
	selected  *podselector.Index
}

// New wires the controller to factory's informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory) *Controller {
	c := &Controller{
		client:    client,
		services:  factory.Core().V1().Services().Lister(),
		endpoints: factory.Core().V1().Endpoints().Lister(),
		selected:  podselector.New(factory.Core().V1().Pods().Lister()),
	}
	c.queue = controller.NewQueue("endpoints", c.sync)
	// Registering on a new informer cannot fail (it fails only once the
	// informer has stopped).
	_ = c.selected.Register(factory.Core().V1().Services().Informer(), factory.Core().V1().Pods().Informer(), c.queue.Add)
	// Endpoints without a Service are left alone, as by
	// kube-controller-manager: hand-written ones (no trigger-time
	// annotation) always; the controller's own (the annotation) are
	// removed when seen at start or when their Service goes. A change to
	// the Endpoints of a Service is undone; a deleted one is remade.
	_, _ = factory.Core().V1().Endpoints().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if ep, ok := o.(*corev1.Endpoints); ok && ep.Annotations[corev1.EndpointsLastChangeTriggerTime] != "" {
				c.queue.AddObject(o)
			}
		},
		UpdateFunc: func(_, o any) {
			if ep, ok := o.(*corev1.Endpoints); ok {
				if _, err := c.services.Services(ep.Namespace).Get(ep.Name); err == nil {
					c.queue.AddObject(o)
				}
			}
		},
		DeleteFunc: c.queue.AddObject,
	})
	return c
}

// Run syncs until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	// Not before the index has every pod: see podselector.HasSynced.
	if !cache.WaitForCacheSync(ctx.Done(), c.selected.HasSynced) {
		return
	}
	c.queue.Run(ctx, workers)
}

func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// The Endpoints of a deleted service go with it.
		err := c.client.CoreV1().Endpoints(ns).Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			err = nil
		}
		return 0, err
	}
	if err != nil {
		return 0, err
	}
	if svc.Spec.Selector == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return 0, nil // hand-written Endpoints are the user's
	}
	want := Desired(svc, c.selected.Pods(ns, name))
	cur, err := c.endpoints.Endpoints(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		want.Annotations = withTrigger(want.Annotations)
		_, err = c.client.CoreV1().Endpoints(ns).Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return 100 * time.Millisecond, nil // the cache is behind
		}
	case err != nil:
	case apiequality.Semantic.DeepEqual(cur.Subsets, want.Subsets) && apiequality.Semantic.DeepEqual(cur.Labels, want.Labels) &&
		cur.Annotations[OverCapacityAnnotation] == want.Annotations[OverCapacityAnnotation]:
		return 0, nil
	default:
		upd := cur.DeepCopy()
		upd.Subsets, upd.Labels = want.Subsets, want.Labels
		delete(upd.Annotations, OverCapacityAnnotation)
		for k, v := range want.Annotations {
			upd.Annotations = withKey(upd.Annotations, k, v)
		}
		upd.Annotations = withTrigger(upd.Annotations)
		_, err = c.client.CoreV1().Endpoints(ns).Update(ctx, upd, metav1.UpdateOptions{})
	}
	if err != nil {
		return 0, fmt.Errorf("endpoints of %s: %w", key, err)
	}
	return 0, nil
}

func withKey(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

func withTrigger(m map[string]string) map[string]string {
	return withKey(m, corev1.EndpointsLastChangeTriggerTime, time.Now().UTC().Format(time.RFC3339Nano))
}
