package apiserver

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestPolicyHookEnsure(t *testing.T) {
	ctx := context.Background()
	rule := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "reader"}
	subject := rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "readers"}
	h := &policyHook{
		roles:    []*rbacv1.ClusterRole{{ObjectMeta: metav1.ObjectMeta{Name: "reader"}, Rules: []rbacv1.PolicyRule{rule}}},
		bindings: []*rbacv1.ClusterRoleBinding{{ObjectMeta: metav1.ObjectMeta{Name: "readers"}, RoleRef: ref, Subjects: []rbacv1.Subject{subject}}},
	}
	// A role that lacks the rule, and a binding to another role: the role
	// gets the rule, the binding (whose roleRef cannot change) is made anew.
	client := fake.NewClientset(
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "reader"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "readers"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "other"}})
	if err := h.ensure(ctx, client); err != nil {
		t.Fatal(err)
	}
	role, err := client.RbacV1().ClusterRoles().Get(ctx, "reader", metav1.GetOptions{})
	if err != nil || len(role.Rules) != 1 {
		t.Errorf("role: %+v, %v", role, err)
	}
	b, err := client.RbacV1().ClusterRoleBindings().Get(ctx, "readers", metav1.GetOptions{})
	if err != nil || b.RoleRef != ref || len(b.Subjects) != 1 {
		t.Errorf("binding: %+v, %v", b, err)
	}
	// Nothing stored: both are created.
	client = fake.NewClientset()
	if err := h.ensure(ctx, client); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Get(ctx, "readers", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	if _, err := client.RbacV1().ClusterRoles().Get(ctx, "reader", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
}
