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
	for _, want := range h.roles {
		err := reconcileStored(ctx, client.RbacV1().ClusterRoles(), want.Name, func(stored *rbacv1.ClusterRole) (*rbacv1.ClusterRole, bool, bool) {
			out, changed := rbac.ReconcileClusterRole(stored, want)
			return out, changed, false
		})
		if err != nil {
			return fmt.Errorf("ClusterRole %s: %w", want.Name, err)
		}
	}
	for _, want := range h.bindings {
		err := reconcileStored(ctx, client.RbacV1().ClusterRoleBindings(), want.Name, func(stored *rbacv1.ClusterRoleBinding) (*rbacv1.ClusterRoleBinding, bool, bool) {
			return rbac.ReconcileClusterRoleBinding(stored, want)
		})
		if err != nil {
			return fmt.Errorf("ClusterRoleBinding %s: %w", want.Name, err)
		}
	}
	return nil
}

// storedObjects are the typed client of one cluster-scoped kind.
type storedObjects[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// reconcileStored brings the stored object name to what reconcile makes
// of it (given nil when there is none): created when there was none or
// reconcile asks to recreate it, updated when it changed.
func reconcileStored[T comparable](ctx context.Context, objects storedObjects[T], name string, reconcile func(stored T) (out T, changed, recreate bool)) error {
	var none T
	stored, err := objects.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		stored, err = none, nil
	}
	if err != nil {
		return err
	}
	out, changed, recreate := reconcile(stored)
	if recreate {
		if err := objects.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		stored = none
	}
	switch {
	case !changed:
	case stored == none:
		_, err = objects.Create(ctx, out, metav1.CreateOptions{})
	default:
		_, err = objects.Update(ctx, out, metav1.UpdateOptions{})
	}
	return err
}
