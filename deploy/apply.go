package deploy

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
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

// CRDs splits objs into the CustomResourceDefinitions and the rest, each
// in order.
func CRDs(objs []runtime.Object) (crds []*apiextensionsv1.CustomResourceDefinition, rest []runtime.Object) {
	for _, o := range objs {
		if crd, ok := o.(*apiextensionsv1.CustomResourceDefinition); ok {
			crds = append(crds, crd)
		} else {
			rest = append(rest, o)
		}
	}
	return crds, rest
}

// CreateCRDs creates each CustomResourceDefinition that does not exist
// yet and waits until the API server serves every one of them
// (Established), so that a controller started next finds its kinds.
func CreateCRDs(ctx context.Context, c apiextensionsclient.Interface, crds []*apiextensionsv1.CustomResourceDefinition, timeout time.Duration) error {
	for _, crd := range crds {
		_, err := c.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CustomResourceDefinition %s: %w", crd.Name, err)
		}
	}
	var waiting string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, crd := range crds {
			got, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil || !Established(got) {
				waiting = crd.Name
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("CustomResourceDefinition %s not established in %s: kubectl describe crd %s", waiting, timeout, waiting)
	}
	return nil
}

// Established reports whether the API server serves crd's resources.
func Established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
