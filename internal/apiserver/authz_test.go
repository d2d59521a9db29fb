package apiserver

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

func TestAuthorizer(t *testing.T) {
	z := &Authorizer{PodNode: func(_ context.Context, ns, name string) (string, error) {
		if name == "mine" {
			return "n1", nil
		}
		if name == "missing" {
			return "", errors.New("not found")
		}
		return "n2", nil
	}}
	admin := &user.DefaultInfo{Name: AdminUser, Groups: []string{AdminGroup}}
	viewer := &user.DefaultInfo{Name: ViewerUser, Groups: []string{ViewerGroup}}
	node := &user.DefaultInfo{Name: NodeUserPrefix + "n1", Groups: []string{NodeGroup}}
	proxy := &user.DefaultInfo{Name: ProxyUser, Groups: []string{ProxyGroup}}
	anon := &user.DefaultInfo{Name: user.Anonymous}
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
		{"node creates service", res(node, "create", "", "services", "", "default", ""), false},
		{"node lists secrets", res(node, "list", "", "secrets", "", "", ""), false},
		{"node watches services", res(node, "watch", "", "services", "", "", ""), true},
		{"proxy watches slices", res(proxy, "watch", "discovery.k8s.io", "endpointslices", "", "", ""), true},
		{"proxy writes services", res(proxy, "update", "", "services", "", "default", "x"), false},
		{"proxy events", res(proxy, "create", "", "events", "", "default", ""), true},
		{"scheduler binds", res(&user.DefaultInfo{Name: SchedulerUser}, "create", "", "pods", "binding", "default", "p"), true},
		{"scheduler deletes pods", res(&user.DefaultInfo{Name: SchedulerUser}, "delete", "", "pods", "", "default", "p"), false},
		{"controller manager", res(&user.DefaultInfo{Name: ControllerManagerUser}, "delete", "apps", "replicasets", "", "default", "r"), true},
		{"stranger", res(&user.DefaultInfo{Name: "mallory"}, "get", "", "pods", "", "default", "p"), false},
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
