package apiserver

import (
	"context"
	"errors"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/svcnet/svcnet/internal/rbac"
)

func TestAuthorizer(t *testing.T) {
	z := &Authorizer{PodNode: func(_ context.Context, ns, name string) (string, error) {
		if name == "mine" {
			return "n1", nil
		}
		if name == "missing" {
			return "", errors.New("etcd unavailable")
		}
		if name == "gone" {
			return "", apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
		}
		return "n2", nil
	}, RBAC: &rbac.Authorizer{Lister: defaultPolicy(t)}}
	admin := &user.DefaultInfo{Name: AdminUser, Groups: []string{AdminGroup}}
	viewer := &user.DefaultInfo{Name: ViewerUser, Groups: []string{ViewerGroup}}
	node := &user.DefaultInfo{Name: NodeUserPrefix + "n1", Groups: []string{NodeGroup}}
	proxy := &user.DefaultInfo{Name: ProxyUser, Groups: []string{ProxyGroup}}
	anon := &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}
	sa := &user.DefaultInfo{Name: "system:serviceaccount:default:default", Groups: []string{"system:serviceaccounts", user.AllAuthenticated}}
	res := func(u user.Info, verb, group, resource, sub, ns, name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub,
			Namespace: ns, Name: name, ResourceRequest: true}
	}
	path := func(u user.Info, p string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: "get", Path: p}
	}
	cases := []struct {
		name  string
		attrs authorizer.AttributesRecord
		allow bool
	}{
		{"admin deletes", res(admin, "delete", "", "services", "", "default", "x"), true},
		{"viewer lists", res(viewer, "list", "apps", "deployments", "", "", ""), true},
		{"viewer writes", res(viewer, "create", "", "configmaps", "", "default", ""), false},
		{"viewer secrets", res(viewer, "get", "", "secrets", "", "default", "s"), false},
		{"viewer metrics", path(viewer, "/metrics"), true},
		{"anonymous healthz", path(anon, "/healthz"), true},
		{"anonymous api", path(anon, "/api"), false},
		{"anonymous metrics", path(anon, "/metrics"), false},
		{"node updates itself", res(node, "patch", "", "nodes", "status", "", "n1"), true},
		{"node updates another", res(node, "update", "", "nodes", "", "", "n2"), false},
		{"node lease", res(node, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "n1"), true},
		{"node other lease", res(node, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "n2"), false},
		{"node own pod status", res(node, "update", "", "pods", "status", "default", "mine"), true},
		{"node other pod status", res(node, "update", "", "pods", "status", "default", "theirs"), false},
		{"node unknown pod", res(node, "update", "", "pods", "status", "default", "missing"), false},
		{"node deletes own pod", res(node, "delete", "", "pods", "", "default", "mine"), true},
		{"node deletes another's pod", res(node, "delete", "", "pods", "", "default", "theirs"), false},
		{"node deletes a pod already gone", res(node, "delete", "", "pods", "", "default", "gone"), true},
		{"node updates a gone pod's status", res(node, "update", "", "pods", "status", "default", "gone"), false},
		{"node deletes a pod it cannot look up", res(node, "delete", "", "pods", "", "default", "missing"), false},
		{"node creates service", res(node, "create", "", "services", "", "default", ""), false},
		{"node lists secrets", res(node, "list", "", "secrets", "", "", ""), false},
		{"node watches services", res(node, "watch", "", "services", "", "", ""), true},
		{"proxy watches slices", res(proxy, "watch", "discovery.k8s.io", "endpointslices", "", "", ""), true},
		{"proxy writes services", res(proxy, "update", "", "services", "", "default", "x"), false},
		{"proxy events", res(proxy, "create", "", "events", "", "default", ""), true},
		{"scheduler binds", res(&user.DefaultInfo{Name: SchedulerUser}, "create", "", "pods", "binding", "default", "p"), true},
		{"scheduler deletes pods", res(&user.DefaultInfo{Name: SchedulerUser}, "delete", "", "pods", "", "default", "p"), false},
		{"controller manager", res(&user.DefaultInfo{Name: ControllerManagerUser}, "delete", "apps", "replicasets", "", "default", "r"), true},
		{"stranger", res(&user.DefaultInfo{Name: "mallory", Groups: []string{user.AllAuthenticated}}, "get", "", "pods", "", "default", "p"), false},
		{"stranger discovers", path(&user.DefaultInfo{Name: "mallory", Groups: []string{user.AllAuthenticated}}, "/apis/apps/v1"), true},
		{"stranger asks may I", res(&user.DefaultInfo{Name: "mallory", Groups: []string{user.AllAuthenticated}}, "create", "authorization.k8s.io", "selfsubjectaccessreviews", "", "", ""), true},
		{"stranger asks may they", res(&user.DefaultInfo{Name: "mallory", Groups: []string{user.AllAuthenticated}}, "create", "authorization.k8s.io", "subjectaccessreviews", "", "", ""), false},
		{"a ServiceAccount without bindings", res(sa, "list", "", "services", "", "default", ""), false},
		{"dns reads the kube-dns configmap", res(&user.DefaultInfo{Name: DNSUser}, "get", "", "configmaps", "", "kube-system", "kube-dns"), true},
		{"dns writes configmaps", res(&user.DefaultInfo{Name: DNSUser}, "update", "", "configmaps", "", "kube-system", "kube-dns"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, reason, err := z.Authorize(context.Background(), c.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if (d == authorizer.DecisionAllow) != c.allow {
				t.Errorf("decision %v (%s), want allow=%v", d, reason, c.allow)
			}
		})
	}
}

// staticLister serves the default policy, with aggregated roles
// aggregated, as the API server holds it once started.
type staticLister struct {
	roles    map[string]*rbacv1.ClusterRole
	bindings []*rbacv1.ClusterRoleBinding
}

func defaultPolicy(t *testing.T) *staticLister {
	res := served{"": {"configmaps", "secrets", "services", "pods", "pods/log"}, "apps": {"deployments", "deployments/scale"}}
	roles := defaultClusterRoles(res)
	l := &staticLister{roles: map[string]*rbacv1.ClusterRole{}, bindings: defaultClusterRoleBindings()}
	// Aggregate until nothing changes (view feeds edit feeds admin).
	for range 3 {
		for _, r := range roles {
			if rules, ok := rbac.AggregatedRules(r, roles); ok {
				r.Rules = rules
			}
		}
	}
	for _, r := range roles {
		l.roles[r.Name] = r
	}
	for _, b := range l.bindings {
		if l.roles[b.RoleRef.Name] == nil {
			t.Fatalf("default binding %s refers to missing ClusterRole %s", b.Name, b.RoleRef.Name)
		}
	}
	return l
}

func (l *staticLister) Role(ns, name string) (*rbacv1.Role, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: rbacv1.GroupName, Resource: "roles"}, name)
}

func (l *staticLister) ClusterRole(name string) (*rbacv1.ClusterRole, error) {
	if r := l.roles[name]; r != nil {
		return r, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterroles"}, name)
}

func (l *staticLister) RoleBindings(string) ([]*rbacv1.RoleBinding, error) { return nil, nil }

func (l *staticLister) ClusterRoleBindings() ([]*rbacv1.ClusterRoleBinding, error) {
	return l.bindings, nil
}

func TestDefaultAggregation(t *testing.T) {
	l := defaultPolicy(t)
	z := &rbac.Authorizer{Lister: l}
	for _, tc := range []struct {
		role, verb, group, resource string
		allow                       bool
	}{
		{"view", "list", "", "pods", true},
		{"view", "get", "", "secrets", false},
		{"edit", "list", "", "pods", true},
		{"edit", "get", "", "secrets", true},
		{"edit", "create", rbacv1.GroupName, "rolebindings", false},
		{"admin", "create", rbacv1.GroupName, "rolebindings", true},
		{"admin", "delete", "apps", "deployments", true},
	} {
		u := &user.DefaultInfo{Name: "u-" + tc.role}
		l.bindings = append(l.bindings, &rbacv1.ClusterRoleBinding{RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: tc.role},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: u.Name}}})
		d, _, _ := z.Authorize(context.Background(), authorizer.AttributesRecord{User: u, Verb: tc.verb, APIGroup: tc.group,
			Resource: tc.resource, Namespace: "team", ResourceRequest: true})
		if (d == authorizer.DecisionAllow) != tc.allow {
			t.Errorf("%s %s %s/%s: allowed=%v, want %v", tc.role, tc.verb, tc.group, tc.resource, d == authorizer.DecisionAllow, tc.allow)
		}
	}
}

func TestAdvertisedPort(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want int
	}{
		{Options{}, 35000},
		{Options{AdvertiseAddress: "172.18.0.1", AlsoListen: []NetnsListen{{Netns: "n", Addr: "172.18.0.1:6443"}}}, 6443},
		{Options{AdvertiseAddress: "10.0.0.1", AlsoListen: []NetnsListen{{Netns: "n", Addr: "172.18.0.1:6443"}}}, 35000},
	} {
		if got := advertisedPort(tc.opts, 35000); got != tc.want {
			t.Errorf("advertisedPort(%+v) = %d, want %d", tc.opts, got, tc.want)
		}
	}
}
