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

// defaultsLister answers with the default policy what the informers do
// not hold (yet): the components' ClusterRoles and bindings are in force
// from the server's first request, not only once the bootstrap hook has
// written them and the informers have seen them (a component refused
// then backs off for up to half a minute before it lists again). A
// stored object of the same name wins, so changes to the defaults count.
type defaultsLister struct {
	*informerLister
	roles    map[string]*rbacv1.ClusterRole
	bindings []*rbacv1.ClusterRoleBinding
}

func newDefaultsLister(l *informerLister, roles []*rbacv1.ClusterRole, bindings []*rbacv1.ClusterRoleBinding) *defaultsLister {
	d := &defaultsLister{informerLister: l, roles: map[string]*rbacv1.ClusterRole{}, bindings: bindings}
	for _, r := range roles {
		d.roles[r.Name] = r
	}
	return d
}

func (d *defaultsLister) ClusterRole(name string) (*rbacv1.ClusterRole, error) {
	r, err := d.informerLister.ClusterRole(name)
	if err != nil {
		if def, ok := d.roles[name]; ok && def.AggregationRule == nil {
			return def, nil
		}
	}
	return r, err
}

func (d *defaultsLister) ClusterRoleBindings() ([]*rbacv1.ClusterRoleBinding, error) {
	out, err := d.informerLister.ClusterRoleBindings()
	if err != nil {
		return nil, err
	}
	// Once the defaults are stored (every request after the start), this
	// adds nothing and allocates nothing.
	for _, b := range d.bindings {
		if _, err := d.cBinds.Get(b.Name); err != nil {
			out = append(out, b)
		}
	}
	return out, nil
}
