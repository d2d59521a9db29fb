// Package serviceaccount gives every namespace what pods expect to find
// there: the "default" ServiceAccount (kube-controller-manager's
// serviceaccount controller) and the kube-root-ca.crt ConfigMap with the
// cluster's CA (its root-ca-cert-publisher), recreating them when they
// are deleted and restoring the CA when it is changed.
package serviceaccount

import (
	"bytes"
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/svcnet/svcnet/internal/controller"
)

const (
	// DefaultName is the ServiceAccount every namespace has.
	DefaultName = "default"
	// RootCAConfigMap holds the CA under RootCAKey.
	RootCAConfigMap = "kube-root-ca.crt"
	RootCAKey       = "ca.crt"
)

// Controller is both controllers: they act on the same event (a
// namespace appears) and the same work queue of namespace names.
type Controller struct {
	client kubernetes.Interface
	caPEM  []byte
	ns     corelisters.NamespaceLister
	sas    corelisters.ServiceAccountLister
	cms    corelisters.ConfigMapLister
	synced []cache.InformerSynced
	queue  *controller.Queue
}

// New watches namespaces through f, and through factories of its own
// only the objects it keeps (not every ConfigMap of the cluster).
func New(client kubernetes.Interface, f informers.SharedInformerFactory, caPEM []byte) (*Controller, []informers.SharedInformerFactory) {
	byName := func(name string) informers.SharedInformerFactory {
		return informers.NewSharedInformerFactoryWithOptions(client, 10*time.Minute,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + name }))
	}
	saF, cmF := byName(DefaultName), byName(RootCAConfigMap)
	c := &Controller{client: client, caPEM: caPEM,
		ns: f.Core().V1().Namespaces().Lister(), sas: saF.Core().V1().ServiceAccounts().Lister(), cms: cmF.Core().V1().ConfigMaps().Lister()}
	c.queue = controller.NewQueueWith("serviceaccount", workqueue.DefaultTypedControllerRateLimiter[string](),
		func(ctx context.Context, ns string) (time.Duration, error) { return 0, c.sync(ctx, ns) })
	byNS := func(obj any) {
		if m, ok := controller.As[metav1.Object](obj); ok {
			ns := m.GetNamespace()
			if ns == "" {
				ns = m.GetName() // a namespace
			}
			c.queue.Add(ns)
		}
	}
	h := cache.ResourceEventHandlerFuncs{AddFunc: byNS, UpdateFunc: func(_, n any) { byNS(n) }, DeleteFunc: byNS}
	for _, inf := range []cache.SharedIndexInformer{f.Core().V1().Namespaces().Informer(),
		saF.Core().V1().ServiceAccounts().Informer(), cmF.Core().V1().ConfigMaps().Informer()} {
		// Deleting a kept object brings it back; adding a namespace adds them.
		_, _ = inf.AddEventHandler(h)
		c.synced = append(c.synced, inf.HasSynced)
	}
	return c, []informers.SharedInformerFactory{saF, cmF}
}

// Run works until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		c.queue.Run(ctx, workers)
	}
}

func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.ns.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	// A namespace being deleted takes no new objects.
	if ns.Status.Phase != corev1.NamespaceActive || ns.DeletionTimestamp != nil {
		return nil
	}
	if _, err := c.sas.ServiceAccounts(name).Get(DefaultName); apierrors.IsNotFound(err) {
		_, err := c.client.CoreV1().ServiceAccounts(name).Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DefaultName}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
			return err
		}
	}
	want := map[string]string{RootCAKey: string(c.caPEM)}
	cm, err := c.cms.ConfigMaps(name).Get(RootCAConfigMap)
	switch {
	case apierrors.IsNotFound(err):
		_, err := c.client.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: RootCAConfigMap, Annotations: map[string]string{
				"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
			Data: want,
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
			return err
		}
	case err != nil:
		return err
	case !bytes.Equal([]byte(cm.Data[RootCAKey]), c.caPEM) || len(cm.Data) != 1:
		out := cm.DeepCopy()
		out.Data = want
		_, err := c.client.CoreV1().ConfigMaps(name).Update(ctx, out, metav1.UpdateOptions{})
		return err
	}
	return nil
}
