// Package clusterroleaggregation keeps aggregated ClusterRoles (admin,
// edit, view, and any with an aggregationRule) holding the rules of the
// ClusterRoles their selectors match, as kube-controller-manager's
// clusterrole-aggregation controller does.
package clusterroleaggregation

import (
	"context"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/rbac"
)

// Controller is the aggregation controller.
type Controller struct {
	client kubernetes.Interface
	roles  rbaclisters.ClusterRoleLister
	synced cache.InformerSynced
	queue  *controller.Queue
}

// New watches ClusterRoles through f.
func New(client kubernetes.Interface, f informers.SharedInformerFactory) *Controller {
	inf := f.Rbac().V1().ClusterRoles()
	c := &Controller{client: client, roles: inf.Lister(), synced: inf.Informer().HasSynced}
	c.queue = controller.NewQueueWith("clusterrole-aggregation", workqueue.DefaultTypedControllerRateLimiter[string](),
		func(ctx context.Context, name string) (time.Duration, error) { return 0, c.sync(ctx, name) })
	// Any change may matter to any aggregated role: look at them all.
	enqueueAll := func(any) {
		all, _ := c.roles.List(labels.Everything())
		for _, r := range all {
			if r.AggregationRule != nil {
				c.queue.Add(r.Name)
			}
		}
	}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueAll,
		UpdateFunc: func(_, n any) { enqueueAll(n) },
		DeleteFunc: enqueueAll,
	})
	return c
}

// Run works until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if cache.WaitForCacheSync(ctx.Done(), c.synced) {
		c.queue.Run(ctx, 1)
	}
}

func (c *Controller) sync(ctx context.Context, name string) error {
	role, err := c.roles.Get(name)
	if err != nil || role.AggregationRule == nil {
		return nil
	}
	all, err := c.roles.List(labels.Everything())
	if err != nil {
		return err
	}
	rules, ok := rbac.AggregatedRules(role, all)
	if !ok || equality.Semantic.DeepEqual(rules, role.Rules) || (len(rules) == 0 && len(role.Rules) == 0) {
		return nil
	}
	out := role.DeepCopy()
	out.Rules = rules
	if out.Rules == nil {
		out.Rules = []rbacv1.PolicyRule{}
	}
	_, err = c.client.RbacV1().ClusterRoles().Update(ctx, out, metav1.UpdateOptions{})
	return err
}
