package apiserver

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/rbac"
)

// policyHook writes the default RBAC policy when the server starts.
type policyHook struct {
	roles    []*rbacv1.ClusterRole
	bindings []*rbacv1.ClusterRoleBinding
}

func (h *policyHook) ensure(ctx context.Context, client kubernetes.Interface) error {
	roles := client.RbacV1().ClusterRoles()
	for _, want := range h.roles {
		stored, err := roles.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			stored, err = nil, nil
		}
		if err != nil {
			return err
		}
		out, changed := rbac.ReconcileClusterRole(stored, want)
		switch {
		case !changed:
		case stored == nil:
			_, err = roles.Create(ctx, out, metav1.CreateOptions{})
		default:
			_, err = roles.Update(ctx, out, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("ClusterRole %s: %w", want.Name, err)
		}
	}
	crbs := client.RbacV1().ClusterRoleBindings()
	for _, want := range h.bindings {
		stored, err := crbs.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			stored, err = nil, nil
		}
		if err != nil {
			return err
		}
		out, changed, recreate := rbac.ReconcileClusterRoleBinding(stored, want)
		if recreate {
			if err := crbs.Delete(ctx, want.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			stored = nil
		}
		switch {
		case !changed:
		case stored == nil:
			_, err = crbs.Create(ctx, out, metav1.CreateOptions{})
		default:
			_, err = crbs.Update(ctx, out, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("ClusterRoleBinding %s: %w", want.Name, err)
		}
	}
	return nil
}
