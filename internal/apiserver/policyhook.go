package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/rbac"
)

// policyHook writes the default RBAC policy when the server starts.
type policyHook struct {
	roles    []*rbacv1.ClusterRole
	bindings []*rbacv1.ClusterRoleBinding
}

func (h *policyHook) run(hookCtx genericapiserver.PostStartHookContext) error {
	client, err := kubernetes.NewForConfig(hookCtx.LoopbackClientConfig)
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(hookCtx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := h.ensure(ctx, client); err != nil {
			slog.Debug("default RBAC policy not written yet", "err", err)
			return false, nil
		}
		return true, nil
	})
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
