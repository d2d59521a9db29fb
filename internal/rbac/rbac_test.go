package rbac

import (
	"context"
	"fmt"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// fakeLister serves fixed objects.
type fakeLister struct {
	roles    []*rbacv1.Role
	cRoles   []*rbacv1.ClusterRole
	bindings []*rbacv1.RoleBinding
	cBinds   []*rbacv1.ClusterRoleBinding
}

func (f *fakeLister) Role(ns, name string) (*rbacv1.Role, error) {
	for _, r := range f.roles {
		if r.Namespace == ns && r.Name == name {
			return r, nil
		}
	}
	return nil, fmt.Errorf("role %s/%s not found", ns, name)
}

func (f *fakeLister) ClusterRole(name string) (*rbacv1.ClusterRole, error) {
	for _, r := range f.cRoles {
		if r.Name == name {
			return r, nil
		}
	}
	return nil, fmt.Errorf("clusterrole %s not found", name)
}

func (f *fakeLister) RoleBindings(ns string) ([]*rbacv1.RoleBinding, error) {
	var out []*rbacv1.RoleBinding
	for _, b := range f.bindings {
		if b.Namespace == ns {
			out = append(out, b)
		}
	}
	return out, nil
}

func (f *fakeLister) ClusterRoleBindings() ([]*rbacv1.ClusterRoleBinding, error) {
	return f.cBinds, nil
}

func meta(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

func TestAuthorizer(t *testing.T) {
	l := &fakeLister{
		cRoles: []*rbacv1.ClusterRole{
			{ObjectMeta: meta("", "view"), Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"services", "pods", "pods/log"}}}},
			{ObjectMeta: meta("", "scaler"), Rules: []rbacv1.PolicyRule{{Verbs: []string{"update"}, APIGroups: []string{"*"}, Resources: []string{"*/scale"}}}},
			{ObjectMeta: meta("", "health"), Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/metrics/*"}}}},
		},
		roles: []*rbacv1.Role{
			{ObjectMeta: meta("team", "cm-one"), Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "update"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"one"}}}},
		},
		cBinds: []*rbacv1.ClusterRoleBinding{
			{ObjectMeta: meta("", "ops-health"), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "health"},
				Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "ops"}}},
			{ObjectMeta: meta("", "dangling"), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "gone"},
				Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "bob"}}},
		},
		bindings: []*rbacv1.RoleBinding{
			{ObjectMeta: meta("team", "alice-view"), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
				Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "alice"}}},
			{ObjectMeta: meta("team", "sa-cm"), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cm-one"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "builder"}}},
			{ObjectMeta: meta("team", "sa-scale"), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "scaler"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "deployer", Namespace: "ci"}}},
		},
	}
	alice := &user.DefaultInfo{Name: "alice"}
	bob := &user.DefaultInfo{Name: "bob", Groups: []string{"ops"}}
	builder := &user.DefaultInfo{Name: "system:serviceaccount:team:builder"}
	builderElsewhere := &user.DefaultInfo{Name: "system:serviceaccount:other:builder"}
	deployer := &user.DefaultInfo{Name: "system:serviceaccount:ci:deployer"}
	res := func(u user.Info, verb, ns, group, resource, sub, name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, Namespace: ns, APIGroup: group, Resource: resource, Subresource: sub, Name: name, ResourceRequest: true}
	}
	path := func(u user.Info, p string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: "get", Path: p}
	}
	for _, tc := range []struct {
		name  string
		attrs authorizer.AttributesRecord
		allow bool
	}{
		{"a ClusterRole bound in a namespace applies there", res(alice, "list", "team", "", "services", "", ""), true},
		{"… and nowhere else", res(alice, "list", "default", "", "services", "", ""), false},
		{"… nor cluster-wide", res(alice, "list", "", "", "services", "", ""), false},
		{"a verb the role lacks", res(alice, "delete", "team", "", "pods", "", "p"), false},
		{"a listed subresource", res(alice, "get", "team", "", "pods", "log", "p"), true},
		{"a subresource not listed", res(alice, "get", "team", "", "pods", "exec", "p"), false},
		{"the same resource in another group", res(alice, "list", "team", "apps", "services", "", ""), false},
		{"resourceNames allow the named object", res(builder, "update", "team", "", "configmaps", "", "one"), true},
		{"… not another", res(builder, "update", "team", "", "configmaps", "", "two"), false},
		{"… nor a list", res(builder, "list", "team", "", "configmaps", "", ""), false},
		{"a ServiceAccount subject is of the binding's namespace", res(builderElsewhere, "get", "team", "", "configmaps", "", "one"), false},
		{"a ServiceAccount of another namespace", res(deployer, "update", "team", "apps", "deployments", "scale", "web"), true},
		{"*/scale is no other subresource", res(deployer, "update", "team", "apps", "deployments", "status", "web"), false},
		{"*/scale is not the resource itself", res(deployer, "update", "team", "apps", "deployments", "", "web"), false},
		{"group subject, exact URL", path(bob, "/healthz"), true},
		{"URL prefix", path(bob, "/metrics/cadvisor"), true},
		{"URL prefix needs the slash", path(bob, "/metricsx"), false},
		{"a dangling binding grants nothing", res(bob, "get", "", "", "nodes", "", "n"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z := &Authorizer{Lister: l}
			d, reason, err := z.Authorize(context.Background(), tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if got := d == authorizer.DecisionAllow; got != tc.allow {
				t.Fatalf("allowed = %v (%q), want %v", got, reason, tc.allow)
			}
			if !tc.allow && d != authorizer.DecisionNoOpinion {
				t.Fatalf("decision %v: RBAC never denies", d)
			}
		})
	}
	// The dangling binding is named in the reason, for the 403's message.
	z := &Authorizer{Lister: l}
	_, reason, _ := z.Authorize(context.Background(), res(bob, "get", "", "", "nodes", "", "n"))
	if reason == "" {
		t.Error("a missing ClusterRole is not reported")
	}
	rules, errs := z.RulesFor(alice, "team")
	if len(rules) != 1 || len(errs) != 0 {
		t.Errorf("RulesFor(alice, team) = %v, %v", rules, errs)
	}
}

func TestCovers(t *testing.T) {
	rule := func(verbs, groups, resources, names []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
	}
	s := func(v ...string) []string { return v }
	for _, tc := range []struct {
		name           string
		owner, servant []rbacv1.PolicyRule
		covered        bool
		missing        int
	}{
		{"equal", []rbacv1.PolicyRule{rule(s("get"), s(""), s("pods"), nil)}, []rbacv1.PolicyRule{rule(s("get"), s(""), s("pods"), nil)}, true, 0},
		{"star owner", []rbacv1.PolicyRule{rule(s("*"), s("*"), s("*"), nil)}, []rbacv1.PolicyRule{rule(s("get", "delete"), s("", "apps"), s("pods", "deployments/scale"), s("x"))}, true, 0},
		{"star servant needs star", []rbacv1.PolicyRule{rule(s("get", "list", "watch"), s(""), s("pods"), nil)}, []rbacv1.PolicyRule{rule(s("*"), s(""), s("pods"), nil)}, false, 1},
		{"split across owner rules", []rbacv1.PolicyRule{rule(s("get"), s(""), s("pods"), nil), rule(s("list"), s(""), s("pods"), nil)}, []rbacv1.PolicyRule{rule(s("get", "list"), s(""), s("pods"), nil)}, true, 0},
		{"one verb missing", []rbacv1.PolicyRule{rule(s("get"), s(""), s("pods"), nil)}, []rbacv1.PolicyRule{rule(s("get", "delete"), s(""), s("pods"), nil)}, false, 1},
		{"subresource wildcard", []rbacv1.PolicyRule{rule(s("update"), s("apps"), s("*/scale"), nil)}, []rbacv1.PolicyRule{rule(s("update"), s("apps"), s("deployments/scale"), nil)}, true, 0},
		{"named owner does not cover all names", []rbacv1.PolicyRule{rule(s("get"), s(""), s("secrets"), s("a"))}, []rbacv1.PolicyRule{rule(s("get"), s(""), s("secrets"), nil)}, false, 1},
		{"named owner covers its name", []rbacv1.PolicyRule{rule(s("get"), s(""), s("secrets"), s("a", "b"))}, []rbacv1.PolicyRule{rule(s("get"), s(""), s("secrets"), s("b"))}, true, 0},
		{"URL prefix", []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/apis/*")}}, []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/apis/apps", "/api")}}, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, missing := Covers(tc.owner, tc.servant)
			if ok != tc.covered || len(missing) != tc.missing {
				t.Fatalf("Covers = %v, %v; want %v with %d missing", ok, missing, tc.covered, tc.missing)
			}
		})
	}
}

func TestReconcile(t *testing.T) {
	want := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view", Labels: map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}
	if got, changed := ReconcileClusterRole(nil, want); !changed || got.Name != "view" {
		t.Fatalf("missing role: %v %v", got, changed)
	}
	stored := want.DeepCopy()
	stored.Rules = append(stored.Rules, rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"x.io"}, Resources: []string{"things"}})
	if _, changed := ReconcileClusterRole(stored, want); changed {
		t.Fatal("a role with more rules than the defaults is changed (rules are never taken away)")
	}
	stored.Rules = stored.Rules[1:]
	got, changed := ReconcileClusterRole(stored, want)
	if !changed || len(got.Rules) != 3 {
		t.Fatalf("lost default rules not restored: %v", got.Rules)
	}
	stored.Annotations = map[string]string{AutoUpdate: "false"}
	if _, changed := ReconcileClusterRole(stored, want); changed {
		t.Fatal("autoupdate=false is not respected")
	}

	wb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: "Group", Name: "g"}}}
	sb := wb.DeepCopy()
	sb.Subjects = []rbacv1.Subject{{Kind: "User", Name: "u"}}
	if got, changed, recreate := ReconcileClusterRoleBinding(sb, wb); !changed || recreate || len(got.Subjects) != 2 {
		t.Fatalf("subjects: %v %v %v", got.Subjects, changed, recreate)
	}
	sb.RoleRef.Name = "edit"
	if _, _, recreate := ReconcileClusterRoleBinding(sb, wb); !recreate {
		t.Fatal("another roleRef must be recreated")
	}
}

func TestAggregatedRules(t *testing.T) {
	sel := metav1.LabelSelector{MatchLabels: map[string]string{"agg": "view"}}
	r1 := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	r2 := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"x.io"}, Resources: []string{"widgets"}}
	agg := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view", Labels: map[string]string{"agg": "view"}},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{sel}}}
	all := []*rbacv1.ClusterRole{
		agg,
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"agg": "view"}}, Rules: []rbacv1.PolicyRule{r2, r1}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"agg": "view"}}, Rules: []rbacv1.PolicyRule{r1}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}},
	}
	rules, ok := AggregatedRules(agg, all)
	if !ok || len(rules) != 2 || rules[0].Resources[0] != "pods" || rules[1].Resources[0] != "widgets" {
		t.Fatalf("AggregatedRules = %v, %v", rules, ok)
	}
	if _, ok := AggregatedRules(all[1], all); ok {
		t.Fatal("a role without aggregationRule aggregates")
	}
}
