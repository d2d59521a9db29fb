// Package replicaset keeps the number of pods of every ReplicaSet, as
// kube-controller-manager's ReplicaSet controller does: it creates pods
// from the template (named <replicaset>-<random>), deletes the least
// valuable ones first, adopts matching orphans, releases pods that stopped
// matching, and reports status. The same controller keeps core/v1
// ReplicationControllers, seen as ReplicaSets (replicationcontroller.go),
// as kube-controller-manager's replication manager does.
package replicaset

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
)

// burst bounds the pods created or deleted in one sync.
const burst = 500

// sets reads and writes the objects the controller keeps, as ReplicaSets.
type sets interface {
	kind() schema.GroupVersionKind
	get(ns, name string) (*appsv1.ReplicaSet, error)
	list(ns string) ([]*appsv1.ReplicaSet, error)
	updateStatus(ctx context.Context, rs *appsv1.ReplicaSet) error
}

// replicaSets are the apps/v1 ReplicaSets themselves.
type replicaSets struct {
	client kubernetes.Interface
	lister appslisters.ReplicaSetLister
}

func (replicaSets) kind() schema.GroupVersionKind {
	return appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
}

func (r replicaSets) get(ns, name string) (*appsv1.ReplicaSet, error) {
	return r.lister.ReplicaSets(ns).Get(name)
}

func (r replicaSets) list(ns string) ([]*appsv1.ReplicaSet, error) {
	return r.lister.ReplicaSets(ns).List(labels.Everything())
}

func (r replicaSets) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet) error {
	_, err := r.client.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{})
	return err
}

// Controller is the ReplicaSet controller.
type Controller struct {
	client   kubernetes.Interface
	sets     sets
	kind     schema.GroupVersionKind
	pods     corelisters.PodLister
	queue    *controller.Queue
	expect   *controller.Expectations
	recorder record.EventRecorder
}

// New wires the controller to factory's informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *Controller {
	inf := factory.Apps().V1().ReplicaSets()
	return newController("replicaset", client, factory, replicaSets{client, inf.Lister()}, inf.Informer(), recorder)
}

func newController(name string, client kubernetes.Interface, factory informers.SharedInformerFactory, s sets, inf cache.SharedIndexInformer, recorder record.EventRecorder) *Controller {
	c := &Controller{
		client:   client,
		sets:     s,
		kind:     s.kind(),
		pods:     factory.Core().V1().Pods().Lister(),
		expect:   controller.NewExpectations(),
		recorder: recorder,
	}
	c.queue = controller.NewQueue(name, c.sync)
	_, _ = inf.AddEventHandler(c.queue.Handler())
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.podAdded,
		UpdateFunc: c.podUpdated,
		DeleteFunc: c.podDeleted,
	})
	return c
}

// Run syncs until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) { c.queue.Run(ctx, workers) }

func (c *Controller) ownerKey(pod *corev1.Pod) (string, bool) {
	ref := metav1.GetControllerOf(pod)
	if apiVersion, kind := c.kind.ToAPIVersionAndKind(); ref == nil || ref.Kind != kind || ref.APIVersion != apiVersion {
		return "", false
	}
	return pod.Namespace + "/" + ref.Name, true
}

func (c *Controller) podAdded(obj any) {
	pod := obj.(*corev1.Pod)
	if key, ok := c.ownerKey(pod); ok {
		c.expect.CreationObserved(key)
		if pod.DeletionTimestamp != nil {
			c.expect.DeletionObserved(key, pod.Name)
		}
		c.queue.Add(key)
		return
	}
	c.enqueueMatching(pod) // an orphan to adopt
}

func (c *Controller) podUpdated(old, obj any) {
	pod, oldPod := obj.(*corev1.Pod), old.(*corev1.Pod)
	if key, ok := c.ownerKey(pod); ok {
		if pod.DeletionTimestamp != nil {
			c.expect.DeletionObserved(key, pod.Name)
		}
		c.queue.Add(key)
	} else {
		c.enqueueMatching(pod)
	}
	if key, ok := c.ownerKey(oldPod); ok {
		c.queue.Add(key)
	}
}

func (c *Controller) podDeleted(obj any) {
	pod, ok := controller.As[*corev1.Pod](obj)
	if !ok {
		return
	}
	if key, ok := c.ownerKey(pod); ok {
		c.expect.DeletionObserved(key, pod.Name)
		c.queue.Add(key)
	}
}

func (c *Controller) enqueueMatching(pod *corev1.Pod) {
	if pod.DeletionTimestamp != nil {
		return
	}
	all, _ := c.sets.list(pod.Namespace)
	for _, rs := range all {
		if sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector); err == nil && !sel.Empty() && sel.Matches(labels.Set(pod.Labels)) {
			c.queue.Add(rs.Namespace + "/" + rs.Name)
		}
	}
}

func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	rs, err := c.sets.get(ns, name)
	if apierrors.IsNotFound(err) {
		c.expect.Forget(key)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	selector, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil || selector.Empty() {
		return 0, nil // invalid and empty selectors are refused by the API server
	}
	all, err := c.pods.Pods(ns).List(labels.Everything())
	if err != nil {
		return 0, err
	}
	owned, err := c.claim(ctx, rs, selector, all)
	if err != nil {
		return 0, err
	}
	var active []*corev1.Pod
	for _, p := range owned {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			active = append(active, p)
		}
	}
	var manageErr error
	if c.expect.Satisfied(key) && rs.DeletionTimestamp == nil {
		manageErr = c.manage(ctx, key, rs, active)
	}
	if err := c.updateStatus(ctx, rs, active, manageErr); err != nil {
		return 0, err
	}
	if manageErr != nil {
		return 0, manageErr
	}
	// Pods become available minReadySeconds after ready: look again then.
	if rs.Spec.MinReadySeconds > 0 {
		return time.Duration(rs.Spec.MinReadySeconds) * time.Second, nil
	}
	return 0, nil
}

// claim adopts matching orphans, releases owned pods that stopped
// matching, and returns the pods rs owns.
func (c *Controller) claim(ctx context.Context, rs *appsv1.ReplicaSet, sel labels.Selector, pods []*corev1.Pod) ([]*corev1.Pod, error) {
	var owned []*corev1.Pod
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		matches := sel.Matches(labels.Set(p.Labels))
		switch {
		case ref != nil && ref.UID == rs.UID && matches:
			owned = append(owned, p)
		case ref != nil && ref.UID == rs.UID:
			patch := fmt.Appendf(nil, `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":%q}],"uid":%q}}`, rs.UID, p.UID)
			if _, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
		case ref == nil && matches && p.DeletionTimestamp == nil && rs.DeletionTimestamp == nil:
			refs, _ := json.Marshal(append(p.OwnerReferences, *metav1.NewControllerRef(rs, c.kind)))
			patch := fmt.Appendf(nil, `{"metadata":{"ownerReferences":%s,"uid":%q}}`, refs, p.UID)
			adopted, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, err
			}
			owned = append(owned, adopted)
		}
	}
	return owned, nil
}

// manage creates or deletes pods to reach the desired count.
func (c *Controller) manage(ctx context.Context, key string, rs *appsv1.ReplicaSet, active []*corev1.Pod) error {
	want := int(ptr.Deref(rs.Spec.Replicas, 1))
	diff := len(active) - want
	switch {
	case diff < 0:
		n := min(-diff, burst)
		c.expect.ExpectCreations(key, n)
		created, err := c.createPods(ctx, key, rs, n)
		if created > 0 {
			c.recorder.Eventf(rs, corev1.EventTypeNormal, "SuccessfulCreate", "Created %d pod(s)", created)
		}
		if err != nil {
			c.recorder.Eventf(rs, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
		}
		return err
	case diff > 0:
		victims := append([]*corev1.Pod(nil), active...)
		rankForDeletion(victims)
		victims = victims[:min(diff, burst)]
		names := make([]string, len(victims))
		for i, p := range victims {
			names[i] = p.Name
		}
		c.expect.ExpectDeletions(key, names...)
		var firstErr error
		for _, p := range victims {
			err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
			if err != nil {
				c.expect.DeletionObserved(key, p.Name)
				if !apierrors.IsNotFound(err) && firstErr == nil {
					firstErr = err
				}
				continue
			}
			c.recorder.Eventf(rs, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
		}
		return firstErr
	}
	return nil
}

// createPods creates n pods in batches of 1, 2, 4 … so that a failing
// template fails fast instead of n times.
func (c *Controller) createPods(ctx context.Context, key string, rs *appsv1.ReplicaSet, n int) (int, error) {
	created := 0
	for batch := 1; created < n; batch *= 2 {
		size := min(batch, n-created)
		var wg sync.WaitGroup
		errs := make(chan error, size)
		for range size {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.client.CoreV1().Pods(rs.Namespace).Create(ctx, podFromTemplate(rs, c.kind), metav1.CreateOptions{}); err != nil {
					c.expect.CreationObserved(key)
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		failed := 0
		var first error
		for err := range errs {
			failed++
			if first == nil {
				first = err
			}
		}
		created += size - failed
		if first != nil {
			// The rest of the pods will not be created: stop expecting them.
			for range n - created - failed {
				c.expect.CreationObserved(key)
			}
			return created, first
		}
	}
	return created, nil
}

func podFromTemplate(rs *appsv1.ReplicaSet, kind schema.GroupVersionKind) *corev1.Pod {
	t := rs.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    rs.Name + "-",
			Namespace:       rs.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, kind)},
		},
		Spec: t.Spec,
	}
	return pod
}

func (c *Controller) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet, active []*corev1.Pod, manageErr error) error {
	st := appsv1.ReplicaSetStatus{Replicas: int32(len(active)), ObservedGeneration: rs.Generation}
	tmplLabels := labels.Set(rs.Spec.Template.Labels)
	now := time.Now()
	for _, p := range active {
		if labels.SelectorFromSet(tmplLabels).Matches(labels.Set(p.Labels)) {
			st.FullyLabeledReplicas++
		}
		if controller.PodReady(p) {
			st.ReadyReplicas++
			if availableSince(p, rs.Spec.MinReadySeconds, now) {
				st.AvailableReplicas++
			}
		}
	}
	for _, cond := range rs.Status.Conditions {
		if cond.Type != appsv1.ReplicaSetReplicaFailure {
			st.Conditions = append(st.Conditions, cond)
		}
	}
	if manageErr != nil {
		st.Conditions = append(st.Conditions, appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure,
			Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: manageErr.Error(), LastTransitionTime: metav1.Now()})
	}
	if apiequality.Semantic.DeepEqual(st, rs.Status) {
		return nil
	}
	upd := rs.DeepCopy()
	upd.Status = st
	err := c.sets.updateStatus(ctx, upd)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // a newer version will be synced
	}
	return err
}

// availableSince reports whether pod has been ready for minReady seconds.
func availableSince(pod *corev1.Pod, minReady int32, now time.Time) bool {
	if minReady == 0 {
		return true
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return !c.LastTransitionTime.IsZero() && now.Sub(c.LastTransitionTime.Time) >= time.Duration(minReady)*time.Second
		}
	}
	return false
}
