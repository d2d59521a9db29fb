package apiserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

func eventually(t *testing.T, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	ctx := framework.Context(t, 30*time.Second)
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	}); err != nil {
		t.Fatalf("timed out waiting: %s", what)
	}
}

func gone(c kubernetes.Interface, ns, name string) func(ctx context.Context) bool {
	return func(ctx context.Context) bool {
		_, err := c.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
}

func ownedBy(name string, owner *corev1.ConfigMap, block bool) *corev1.ConfigMap {
	cm := configMap(name, nil)
	cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		BlockOwnerDeletion: ptr.To(block)}}
	return cm
}

// TestGarbageCollection deletes owners with each propagation policy.
func TestGarbageCollection(t *testing.T) {
	s := framework.SharedAPIServer(t)
	c := s.Client()
	ctx := framework.Context(t, 2*time.Minute)
	ns := s.CreateNamespace("gc")
	cms := c.CoreV1().ConfigMaps(ns)
	mk := func(cm *corev1.ConfigMap) *corev1.ConfigMap {
		t.Helper()
		out, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	t.Run("background", func(t *testing.T) {
		owner := mk(configMap("bg-owner", nil))
		mk(ownedBy("bg-child", owner, false))
		grandchildOwner, _ := cms.Get(ctx, "bg-child", metav1.GetOptions{})
		mk(ownedBy("bg-grandchild", grandchildOwner, false))
		if err := cms.Delete(ctx, "bg-owner", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "child collected", gone(c, ns, "bg-child"))
		eventually(t, "grandchild collected", gone(c, ns, "bg-grandchild"))
	})

	t.Run("orphan", func(t *testing.T) {
		owner := mk(configMap("or-owner", nil))
		mk(ownedBy("or-child", owner, false))
		if err := cms.Delete(ctx, "or-owner", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "owner deleted", gone(c, ns, "or-owner"))
		child, err := cms.Get(ctx, "or-child", metav1.GetOptions{})
		if err != nil || len(child.OwnerReferences) != 0 {
			t.Fatalf("orphaned child: %v, owners %v", err, child.OwnerReferences)
		}
	})

	t.Run("foreground", func(t *testing.T) {
		owner := mk(configMap("fg-owner", nil))
		child := mk(ownedBy("fg-child", owner, true))
		// A finalizer holds the child, so the owner must wait for it.
		child.Finalizers = []string{"example.com/hold"}
		if _, err := cms.Update(ctx, child, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(ctx, "fg-owner", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "child deleting", func(ctx context.Context) bool {
			ch, err := cms.Get(ctx, "fg-child", metav1.GetOptions{})
			return err == nil && ch.DeletionTimestamp != nil
		})
		o, err := cms.Get(ctx, "fg-owner", metav1.GetOptions{})
		if err != nil || o.DeletionTimestamp == nil {
			t.Fatalf("owner must wait in deletion for its blocking child: %v %+v", err, o)
		}
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := cms.Patch(ctx, "fg-child", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "child gone", gone(c, ns, "fg-child"))
		eventually(t, "owner gone after its child", gone(c, ns, "fg-owner"))
	})

	t.Run("some owners left", func(t *testing.T) {
		a, b := mk(configMap("two-a", nil)), mk(configMap("two-b", nil))
		child := ownedBy("two-child", a, false)
		child.OwnerReferences = append(child.OwnerReferences, ownedBy("", b, false).OwnerReferences...)
		mk(child)
		if err := cms.Delete(ctx, "two-a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "dangling owner reference removed", func(ctx context.Context) bool {
			ch, err := cms.Get(ctx, "two-child", metav1.GetOptions{})
			return err == nil && len(ch.OwnerReferences) == 1 && ch.OwnerReferences[0].UID == b.UID
		})
	})
}

// TestNamespaceDeletion deletes a namespace with content in it.
func TestNamespaceDeletion(t *testing.T) {
	s := framework.SharedAPIServer(t)
	c := s.Client()
	ctx := framework.Context(t, time.Minute)
	doomed := framework.UniqueName("e2e-doomed")
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: doomed}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		if _, err := c.CoreV1().ConfigMaps(doomed).Create(ctx, configMap(n, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CoreV1().Services(doomed).Create(ctx, nodePortService("svc"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Namespaces().Delete(ctx, doomed, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// While it terminates nothing new may be created in it.
	if _, err := c.CoreV1().ConfigMaps(doomed).Create(ctx, configMap("late", nil), metav1.CreateOptions{}); err == nil {
		if ns, err2 := c.CoreV1().Namespaces().Get(ctx, doomed, metav1.GetOptions{}); err2 == nil && ns.DeletionTimestamp != nil {
			t.Error("created an object in a terminating namespace")
		}
	} else if !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err) {
		t.Errorf("create in terminating namespace: %v, want Forbidden", err)
	}
	eventually(t, "namespace removed", func(ctx context.Context) bool {
		_, err := c.CoreV1().Namespaces().Get(ctx, doomed, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if l, err := c.CoreV1().Services(doomed).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("services left in the deleted namespace: %v %v", err, l)
	}
	// The system namespaces cannot be deleted. (Were that to regress, this
	// would delete them under the other tests on the shared server too:
	// this test's failure says why theirs fail.)
	for _, ns := range []string{"default", "kube-system", "kube-public"} {
		err := c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("delete namespace %s: %v, want Forbidden", ns, err)
		}
	}
}

// TestPodDeletionAndBinding: pods on a node delete gracefully, unbound
// pods at once; binding places a pod once.
func TestPodDeletionAndBinding(t *testing.T) {
	s := framework.SharedAPIServer(t)
	c := s.Client()
	ctx := framework.Context(t, time.Minute)
	ns := s.CreateNamespace("poddeletion")
	pods := c.CoreV1().Pods(ns)
	newPod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "svcnet/echo"}}}}
	}
	p, err := pods.Create(ctx, newPod("p"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodPending || p.Spec.RestartPolicy != corev1.RestartPolicyAlways || *p.Spec.TerminationGracePeriodSeconds != 30 ||
		p.Spec.Containers[0].ImagePullPolicy != corev1.PullAlways || p.Spec.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("pod defaults: %+v", p)
	}
	bind := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
	if err := pods.Bind(ctx, bind, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	p, _ = pods.Get(ctx, "p", metav1.GetOptions{})
	if p.Spec.NodeName != "node-1" || len(p.Status.Conditions) == 0 || p.Status.Conditions[0].Type != corev1.PodScheduled {
		t.Errorf("after bind: node %q conditions %v", p.Spec.NodeName, p.Status.Conditions)
	}
	bind.Target.Name = "node-2"
	if err := pods.Bind(ctx, bind, metav1.CreateOptions{}); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "already assigned") {
		t.Errorf("second bind: %v, want Conflict", err)
	}
	// A bound pod is deleted gracefully: it stays, marked, until its node
	// (or anyone) deletes it with grace period 0.
	if err := pods.Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err = pods.Get(ctx, "p", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil || *p.DeletionGracePeriodSeconds != 30 {
		t.Fatalf("graceful delete: %v %+v", err, p.ObjectMeta)
	}
	if err := pods.Delete(ctx, "p", *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after grace 0: %v", err)
	}
	// An unscheduled pod goes at once.
	if _, err := pods.Create(ctx, newPod("q"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "q", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "q", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("unscheduled pod after delete: %v", err)
	}
	// Finalizers hold an object until they are removed.
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held",
		Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().ConfigMaps(ns).Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	held, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "held", metav1.GetOptions{})
	if err != nil || held.DeletionTimestamp == nil {
		t.Fatalf("finalizer did not hold: %v", err)
	}
	if _, err := c.CoreV1().ConfigMaps(ns).Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "released object gone", gone(c, ns, "held"))
	// deletecollection.
	for _, n := range []string{"x1", "x2", "x3"} {
		if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, configMap(n, map[string]string{"batch": "x"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "batch=x"}); err != nil {
		t.Fatal(err)
	}
	if l, _ := c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch=x"}); len(l.Items) != 0 {
		t.Errorf("deletecollection left %d", len(l.Items))
	}
}
