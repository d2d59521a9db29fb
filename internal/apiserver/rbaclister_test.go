package apiserver

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/rbac"
)

// TestDefaultsLister: the default policy is in force before the
// informers hold it; a stored object of the same name wins.
func TestDefaultsLister(t *testing.T) {
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	crIdx, crbIdx := idx(), idx()
	l := &informerLister{roles: rbaclisters.NewRoleLister(idx()), cRoles: rbaclisters.NewClusterRoleLister(crIdx),
		bindings: rbaclisters.NewRoleBindingLister(idx()), cBinds: rbaclisters.NewClusterRoleBindingLister(crbIdx)}
	d := newDefaultsLister(l, defaultClusterRoles(served{}), defaultClusterRoleBindings())
	z := &rbac.Authorizer{Lister: d}
	proxy := &user.DefaultInfo{Name: ProxyUser, Groups: []string{ProxyGroup}}
	watchSlices := authorizer.AttributesRecord{User: proxy, Verb: "watch", APIGroup: "discovery.k8s.io", Resource: "endpointslices", ResourceRequest: true}
	if dec, _, _ := z.Authorize(context.Background(), watchSlices); dec != authorizer.DecisionAllow {
		t.Fatal("the proxy is refused before the default policy is stored")
	}
	// An administrator's version of the binding (no subjects) wins.
	if err := crbIdx.Add(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "system:node-proxier"},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "system:node-proxier"}}); err != nil {
		t.Fatal(err)
	}
	if dec, _, _ := z.Authorize(context.Background(), watchSlices); dec == authorizer.DecisionAllow {
		t.Fatal("the stored binding does not override the default")
	}
}
