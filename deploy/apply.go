package deploy

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// Create creates each object that does not exist yet, in order; an
// existing one is left as it is (a restarted `svcnet up` keeps what the
// user changed). Kinds the manifests do not use are refused.
func Create(ctx context.Context, c kubernetes.Interface, objs []runtime.Object) error {
	for _, obj := range objs {
		var err error
		o := metav1.CreateOptions{}
		switch x := obj.(type) {
		case *corev1.Namespace:
			_, err = c.CoreV1().Namespaces().Create(ctx, x, o)
		case *corev1.ServiceAccount:
			_, err = c.CoreV1().ServiceAccounts(x.Namespace).Create(ctx, x, o)
		case *corev1.ConfigMap:
			_, err = c.CoreV1().ConfigMaps(x.Namespace).Create(ctx, x, o)
		case *corev1.Service:
			_, err = c.CoreV1().Services(x.Namespace).Create(ctx, x, o)
		case *rbacv1.ClusterRole:
			_, err = c.RbacV1().ClusterRoles().Create(ctx, x, o)
		case *rbacv1.ClusterRoleBinding:
			_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, x, o)
		case *rbacv1.Role:
			_, err = c.RbacV1().Roles(x.Namespace).Create(ctx, x, o)
		case *rbacv1.RoleBinding:
			_, err = c.RbacV1().RoleBindings(x.Namespace).Create(ctx, x, o)
		case *appsv1.DaemonSet:
			_, err = c.AppsV1().DaemonSets(x.Namespace).Create(ctx, x, o)
		case *appsv1.Deployment:
			_, err = c.AppsV1().Deployments(x.Namespace).Create(ctx, x, o)
		case *networkingv1.IngressClass:
			_, err = c.NetworkingV1().IngressClasses().Create(ctx, x, o)
		default:
			return fmt.Errorf("deploy: cannot create a %T", obj)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s: %w", describe(obj), err)
		}
	}
	return nil
}

func describe(obj runtime.Object) string {
	m, err := metaOf(obj)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if m.GetNamespace() != "" {
		return fmt.Sprintf("%s %s/%s", kind, m.GetNamespace(), m.GetName())
	}
	return kind + " " + m.GetName()
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", obj)
	}
	return m, nil
}
