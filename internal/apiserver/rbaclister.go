package apiserver

import (
	"context"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
)

// informerLister gives the RBAC authorizer the server's own informers'
// view of Roles and bindings (read through the loopback client, as
// kube-apiserver does).
type informerLister struct {
	roles    rbaclisters.RoleLister
	cRoles   rbaclisters.ClusterRoleLister
	bindings rbaclisters.RoleBindingLister
	cBinds   rbaclisters.ClusterRoleBindingLister
	synced   []cache.InformerSynced
}

func newInformerLister(f informers.SharedInformerFactory) *informerLister {
	v1 := f.Rbac().V1()
	l := &informerLister{
		roles: v1.Roles().Lister(), cRoles: v1.ClusterRoles().Lister(),
		bindings: v1.RoleBindings().Lister(), cBinds: v1.ClusterRoleBindings().Lister(),
	}
	for _, i := range []cache.SharedIndexInformer{v1.Roles().Informer(), v1.ClusterRoles().Informer(),
		v1.RoleBindings().Informer(), v1.ClusterRoleBindings().Informer()} {
		l.synced = append(l.synced, i.HasSynced)
	}
	return l
}

func (l *informerLister) Role(ns, name string) (*rbacv1.Role, error) {
	return l.roles.Roles(ns).Get(name)
}

func (l *informerLister) ClusterRole(name string) (*rbacv1.ClusterRole, error) {
	return l.cRoles.Get(name)
}

func (l *informerLister) RoleBindings(ns string) ([]*rbacv1.RoleBinding, error) {
	return l.bindings.RoleBindings(ns).List(labels.Everything())
}

func (l *informerLister) ClusterRoleBindings() ([]*rbacv1.ClusterRoleBinding, error) {
	return l.cBinds.List(labels.Everything())
}

// waitSynced reports whether the informers have loaded, waiting for them
// up to 10 seconds (only while the server starts).
func (l *informerLister) waitSynced(ctx context.Context) bool {
	done := func() bool {
		for _, s := range l.synced {
			if !s() {
				return false
			}
		}
		return true
	}
	if done() {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return cache.WaitForCacheSync(ctx.Done(), l.synced...)
}
