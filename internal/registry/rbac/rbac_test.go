package rbac

import (
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/registry"

	. "github.com/svcnet/svcnet/internal/registry/registrytest"
)

var (
	readPods = rbacv1.PolicyRule{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	healthz  = rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/healthz/*"}}
)

func TestRuleValidation(t *testing.T) {
	cases := []struct {
		name       string
		rule       rbacv1.PolicyRule
		role       []string // errors in a Role
		cluster    []string // errors in a ClusterRole
		sameForAll bool
	}{
		{"resource rule", readPods, nil, nil, true},
		{"every resource", rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}, nil, nil, true},
		{"named resources", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{"kube-root-ca.crt"}}, nil, nil, true},
		{"no verbs", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}}, []string{Req("rules[0].verbs")}, nil, true},
		{"no api groups", rbacv1.PolicyRule{Verbs: []string{"get"}, Resources: []string{"pods"}}, []string{Req("rules[0].apiGroups")}, nil, true},
		{"no resources", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}}, []string{Req("rules[0].resources")}, nil, true},
		{"non-resource URLs", healthz, []string{Inv("rules[0].nonResourceURLs")}, nil, false},
		{"every non-resource URL", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"*"}},
			[]string{Inv("rules[0].nonResourceURLs")}, nil, false},
		{"resources and non-resource URLs", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"},
			NonResourceURLs: []string{"/metrics"}},
			[]string{Inv("rules[0].nonResourceURLs"), Inv("rules[0].nonResourceURLs")}, []string{Inv("rules[0].nonResourceURLs")}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cluster := tc.cluster
			if tc.sameForAll {
				cluster = tc.role
			}
			role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "default"}, Rules: []rbacv1.PolicyRule{tc.rule}}
			CheckErrors(t, ValidateCreate(Role, role), tc.role...)
			clusterRole := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Rules: []rbacv1.PolicyRule{tc.rule}}
			CheckErrors(t, ValidateCreate(ClusterRole, clusterRole), cluster...)
		})
	}
}

func TestRoleValidate(t *testing.T) {
	cases := []struct {
		name string
		role *rbacv1.Role
		want []string
	}{
		{"reader", &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader", Namespace: "default"}, Rules: []rbacv1.PolicyRule{readPods}}, nil},
		{"no rules", &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "nothing", Namespace: "default"}}, nil},
		{"name with a colon", &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "system:controller:bootstrap-signer", Namespace: "kube-system"}}, nil},
		{"name with a slash", &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "a/b", Namespace: "default"}}, []string{Inv("metadata.name")}},
		{"name ..", &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "..", Namespace: "default"}}, []string{Inv("metadata.name")}},
		{"no namespace", &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r"}}, []string{Req("metadata.namespace")}},
		{"second rule invalid", &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "default"},
			Rules: []rbacv1.PolicyRule{readPods, {Verbs: []string{"get"}, APIGroups: []string{""}}}}, []string{Req("rules[1].resources")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			CheckErrors(t, ValidateCreate(Role, tc.role), tc.want...)
		})
	}
}

func TestClusterRoleValidate(t *testing.T) {
	aggregate := &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
		{MatchLabels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}}}}
	cases := []struct {
		name string
		role *rbacv1.ClusterRole
		want []string
	}{
		{"system role", &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:node"}, Rules: []rbacv1.PolicyRule{readPods, healthz}}, nil},
		{"aggregated", &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view"}, AggregationRule: aggregate}, nil},
		{"aggregation without selectors", &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view"},
			AggregationRule: &rbacv1.AggregationRule{}}, []string{Req("aggregationRule.clusterRoleSelectors")}},
		{"namespaced", &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view", Namespace: "default"}},
			[]string{"metadata.namespace: Forbidden"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			CheckErrors(t, ValidateCreate(ClusterRole, tc.role), tc.want...)
		})
	}
}

func TestBindingDefaults(t *testing.T) {
	subjects := func() []rbacv1.Subject {
		return []rbacv1.Subject{
			{Kind: rbacv1.UserKind, Name: "jane"},
			{Kind: rbacv1.GroupKind, Name: "devs"},
			{Kind: rbacv1.ServiceAccountKind, Name: "builder", Namespace: "ci"},
		}
	}
	check := func(t *testing.T, ref rbacv1.RoleRef, subjects []rbacv1.Subject) {
		t.Helper()
		if ref.APIGroup != rbacv1.GroupName {
			t.Errorf("roleRef.apiGroup %q", ref.APIGroup)
		}
		for _, want := range []string{rbacv1.GroupName, rbacv1.GroupName, ""} {
			if subjects[0].APIGroup != want {
				t.Errorf("subject %s: apiGroup %q, want %q", subjects[0].Kind, subjects[0].APIGroup, want)
			}
			subjects = subjects[1:]
		}
	}
	t.Run("role binding create", func(t *testing.T) {
		b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "default"},
			RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "pod-reader"}, Subjects: subjects()}
		CheckErrors(t, ValidateCreate(RoleBinding, b))
		check(t, b.RoleRef, b.Subjects)
	})
	t.Run("role binding update", func(t *testing.T) {
		old := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "default"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"}}
		b := old.DeepCopy()
		b.RoleRef.APIGroup, b.Subjects = "", subjects()
		CheckErrors(t, ValidateUpdate(RoleBinding, b, old))
		check(t, b.RoleRef, b.Subjects)
	})
	t.Run("cluster role binding create", func(t *testing.T) {
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
			RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, Subjects: subjects()}
		CheckErrors(t, ValidateCreate(ClusterRoleBinding, b))
		check(t, b.RoleRef, b.Subjects)
	})
	t.Run("cluster role binding update", func(t *testing.T) {
		old := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}}
		b := old.DeepCopy()
		b.RoleRef.APIGroup, b.Subjects = "", subjects()
		CheckErrors(t, ValidateUpdate(ClusterRoleBinding, b, old))
		check(t, b.RoleRef, b.Subjects)
	})
}

func TestBindingValidate(t *testing.T) {
	sa := func(name, ns string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}
	}
	cases := []struct {
		name     string
		ref      rbacv1.RoleRef
		subjects []rbacv1.Subject
		binding  []string // errors of a RoleBinding
		cluster  []string // errors of a ClusterRoleBinding
	}{
		{"service account of another namespace", rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, []rbacv1.Subject{sa("builder", "ci")}, nil, nil},
		{"service account without namespace", rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, []rbacv1.Subject{sa("builder", "")},
			nil, []string{Req("subjects[0].namespace")}},
		{"a Role", rbacv1.RoleRef{Kind: "Role", Name: "pod-reader"}, nil, nil, []string{Unsup("roleRef.kind")}},
		{"unknown role kind", rbacv1.RoleRef{Kind: "Policy", Name: "p"}, nil, []string{Unsup("roleRef.kind")}, []string{Unsup("roleRef.kind")}},
		{"role of another group", rbacv1.RoleRef{APIGroup: "example.com", Kind: "ClusterRole", Name: "view"}, nil,
			[]string{Unsup("roleRef.apiGroup")}, []string{Unsup("roleRef.apiGroup")}},
		{"no role name", rbacv1.RoleRef{Kind: "ClusterRole"}, nil, []string{Req("roleRef.name")}, []string{Req("roleRef.name")}},
		{"bad role name", rbacv1.RoleRef{Kind: "ClusterRole", Name: "a/b"}, nil, []string{Inv("roleRef.name")}, []string{Inv("roleRef.name")}},
		{"system role name", rbacv1.RoleRef{Kind: "ClusterRole", Name: "system:auth-delegator"}, nil, nil, nil},
		{"subject without a name", rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, []rbacv1.Subject{{Kind: rbacv1.UserKind}},
			[]string{Req("subjects[0].name")}, []string{Req("subjects[0].name")}},
		{"user of another group", rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
			[]rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "jane", APIGroup: "example.com"}},
			[]string{Unsup("subjects[0].apiGroup")}, []string{Unsup("subjects[0].apiGroup")}},
		{"service account with a group", rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
			[]rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "builder", Namespace: "ci", APIGroup: rbacv1.GroupName}},
			[]string{Unsup("subjects[0].apiGroup")}, []string{Unsup("subjects[0].apiGroup")}},
		{"bad service account name", rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, []rbacv1.Subject{sa("Builder", "ci")},
			[]string{Inv("subjects[0].name")}, []string{Inv("subjects[0].name")}},
		{"user names are free-form", rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
			[]rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "system:serviceaccount:ci:builder"}, {Kind: rbacv1.UserKind, Name: "Jane Doe"}}, nil, nil},
		{"unknown subject kind", rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, []rbacv1.Subject{{Kind: "Robot", Name: "r2"}},
			[]string{Unsup("subjects[0].kind")}, []string{Unsup("subjects[0].kind")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "default"}, RoleRef: tc.ref,
				Subjects: append([]rbacv1.Subject(nil), tc.subjects...)}
			CheckErrors(t, ValidateCreate(RoleBinding, rb), tc.binding...)
			crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}, RoleRef: tc.ref,
				Subjects: append([]rbacv1.Subject(nil), tc.subjects...)}
			CheckErrors(t, ValidateCreate(ClusterRoleBinding, crb), tc.cluster...)
		})
	}
}

func TestBindingValidateUpdate(t *testing.T) {
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}
	cases := []struct {
		name     string
		ref      rbacv1.RoleRef
		subjects []rbacv1.Subject
		want     []string
	}{
		{"subjects added", ref, []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "jane"}}, nil},
		{"other role", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}, nil, []string{Inv("roleRef")}},
		// The group is defaulted before the comparison.
		{"group left out", rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "default"}, RoleRef: ref}
			obj := &rbacv1.RoleBinding{ObjectMeta: old.ObjectMeta, RoleRef: tc.ref, Subjects: tc.subjects}
			CheckErrors(t, ValidateUpdate(RoleBinding, obj, old), tc.want...)
			cold := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}, RoleRef: ref}
			cobj := &rbacv1.ClusterRoleBinding{ObjectMeta: cold.ObjectMeta, RoleRef: tc.ref, Subjects: tc.subjects}
			CheckErrors(t, ValidateUpdate(ClusterRoleBinding, cobj, cold), tc.want...)
		})
	}
}

func TestRoleTables(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("CET", 3600)))
	for _, obj := range []runtime.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "default", CreationTimestamp: created}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "r", CreationTimestamp: created}},
	} {
		k := Role
		if _, ok := obj.(*rbacv1.ClusterRole); ok {
			k = ClusterRole
		}
		t.Run(k.Singular, func(t *testing.T) {
			cols, row := TableOf(t, k, obj)
			if want := []string{"Name", "Created At"}; !slices.Equal(cols, want) {
				t.Errorf("columns %q, want %q", cols, want)
			}
			if want := []any{"r", "2026-03-04T04:06:07Z"}; !slices.Equal(row, want) {
				t.Errorf("row %q, want %q", row, want)
			}
		})
	}
}

func TestBindingTables(t *testing.T) {
	subjects := []rbacv1.Subject{
		{Kind: rbacv1.UserKind, Name: "jane"}, {Kind: rbacv1.UserKind, Name: "joe"},
		{Kind: rbacv1.GroupKind, Name: "devs"},
		{Kind: rbacv1.ServiceAccountKind, Name: "builder", Namespace: "ci"},
	}
	ago := metav1.NewTime(time.Now().Add(-48*time.Hour - time.Second))
	cols := []string{"Name", "Role", "Age", "Users*", "Groups*", "ServiceAccounts*"}
	cases := []struct {
		kind *registry.Kind
		obj  runtime.Object
		want []any
	}{
		{RoleBinding, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "default", CreationTimestamp: ago},
			RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "pod-reader"}, Subjects: subjects},
			[]any{"b", "Role/pod-reader", "2d", "jane, joe", "devs", "ci/builder"}},
		{ClusterRoleBinding, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", CreationTimestamp: ago},
			RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}},
			[]any{"b", "ClusterRole/view", "2d", "", "", ""}},
	}
	for _, tc := range cases {
		t.Run(tc.kind.Singular, func(t *testing.T) {
			c, row := TableOf(t, tc.kind, tc.obj)
			if !slices.Equal(c, cols) {
				t.Errorf("columns %q, want %q", c, cols)
			}
			if !slices.Equal(row, tc.want) {
				t.Errorf("row %q, want %q", row, tc.want)
			}
		})
	}
}
