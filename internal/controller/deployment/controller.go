// Package deployment rolls Deployments out through ReplicaSets, as
// kube-controller-manager's Deployment controller does: one ReplicaSet per
// pod template (named <deployment>-<template hash>), rolling updates within
// maxSurge and maxUnavailable or Recreate, scaling, revision history, and
// status with observedGeneration and the Available and Progressing
// conditions.
package deployment

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
)

var kind = appsv1.SchemeGroupVersion.WithKind("Deployment")

// Controller is the Deployment controller.
type Controller struct {
	client      kubernetes.Interface
	deployments appslisters.DeploymentLister
	sets        appslisters.ReplicaSetLister
	pods        corelisters.PodLister
	queue       *controller.Queue
	recorder    record.EventRecorder
}

// New wires the controller to factory's informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *Controller {
	c := &Controller{
		client:      client,
		deployments: factory.Apps().V1().Deployments().Lister(),
		sets:        factory.Apps().V1().ReplicaSets().Lister(),
		pods:        factory.Core().V1().Pods().Lister(),
		recorder:    recorder,
	}
	c.queue = controller.NewQueue("deployment", c.sync)
	_, _ = factory.Apps().V1().Deployments().Informer().AddEventHandler(c.queue.Handler())
	owner := func(obj any) {
		rs, ok := controller.As[*appsv1.ReplicaSet](obj)
		if !ok {
			return
		}
		if ref := metav1.GetControllerOf(rs); ref != nil && ref.Kind == "Deployment" {
			c.queue.Add(rs.Namespace + "/" + ref.Name)
		}
	}
	_, _ = factory.Apps().V1().ReplicaSets().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: owner, UpdateFunc: func(_, o any) { owner(o) }, DeleteFunc: owner,
	})
	// Recreate waits for old pods to be gone.
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if pod, ok := controller.As[*corev1.Pod](obj); ok {
				if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "ReplicaSet" {
					if rs, err := c.sets.ReplicaSets(pod.Namespace).Get(ref.Name); err == nil {
						owner(rs)
					}
				}
			}
		},
	})
	return c
}

// Run syncs until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) { c.queue.Run(ctx, workers) }

func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	d, gone, err := controller.Lookup(key, c.deployments.Deployments)
	if gone || err != nil || d.DeletionTimestamp != nil {
		return 0, err // the garbage collector removes the replica sets of a gone deployment
	}
	all, err := c.ownedSets(d)
	if err != nil {
		return 0, err
	}
	newRS, old := splitNew(d, all)
	if !d.Spec.Paused {
		if newRS == nil {
			if newRS, err = c.createNewRS(ctx, d, all); err != nil {
				return 0, err
			}
			all = append(all, newRS)
		}
		switch d.Spec.Strategy.Type {
		case appsv1.RecreateDeploymentStrategyType:
			err = c.recreate(ctx, d, newRS, old)
		default:
			err = c.rollingUpdate(ctx, d, all, newRS, old)
		}
		if err != nil {
			return 0, err
		}
		if err := c.cleanup(ctx, d, old); err != nil {
			return 0, err
		}
	} else if newRS != nil && len(old) == 0 {
		// A paused deployment still scales.
		if err := c.scale(ctx, d, newRS, ptr.Deref(d.Spec.Replicas, 1)); err != nil {
			return 0, err
		}
	}
	return c.updateStatus(ctx, d, all, newRS)
}

// ownedSets lists the replica sets d controls.
func (c *Controller) ownedSets(d *appsv1.Deployment) ([]*appsv1.ReplicaSet, error) {
	sets, err := c.sets.ReplicaSets(d.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*appsv1.ReplicaSet
	for _, rs := range sets {
		if ref := metav1.GetControllerOf(rs); ref != nil && ref.UID == d.UID {
			out = append(out, rs)
		}
	}
	return out, nil
}

func splitNew(d *appsv1.Deployment, all []*appsv1.ReplicaSet) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet) {
	var newRS *appsv1.ReplicaSet
	var old []*appsv1.ReplicaSet
	sorted := append([]*appsv1.ReplicaSet(nil), all...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].CreationTimestamp.Before(&sorted[j].CreationTimestamp) })
	for _, rs := range sorted {
		if newRS == nil && sameTemplate(rs, d) {
			newRS = rs
			continue
		}
		old = append(old, rs)
	}
	return newRS, old
}

func (c *Controller) createNewRS(ctx context.Context, d *appsv1.Deployment, all []*appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	hash := controller.TemplateHash(&d.Spec.Template, d.Status.CollisionCount)
	tmpl := d.Spec.Template.DeepCopy()
	tmpl.Labels = withLabel(tmpl.Labels, PodTemplateHashLabel, hash)
	sel := d.Spec.Selector.DeepCopy()
	sel.MatchLabels = withLabel(sel.MatchLabels, PodTemplateHashLabel, hash)
	var replicas int32
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		probe := &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0)}}
		replicas = newReplicasForRollingUpdate(d, all, probe)
	}
	surge, _ := resolveFenceposts(d)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			Labels:          tmpl.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, kind)},
			Annotations: map[string]string{
				RevisionAnnotation:        strconv.FormatInt(maxRevision(all)+1, 10),
				DesiredReplicasAnnotation: strconv.Itoa(int(ptr.Deref(d.Spec.Replicas, 1))),
				MaxReplicasAnnotation:     strconv.Itoa(int(ptr.Deref(d.Spec.Replicas, 1) + surge)),
			},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas), MinReadySeconds: d.Spec.MinReadySeconds, Selector: sel, Template: *tmpl},
	}
	out, err := c.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		// Another template hashed the same: count a collision and retry.
		existing, getErr := c.client.AppsV1().ReplicaSets(d.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
		if getErr == nil && metav1.IsControlledBy(existing, d) && sameTemplate(existing, d) {
			return existing, nil
		}
		upd := d.DeepCopy()
		upd.Status.CollisionCount = ptr.To(ptr.Deref(d.Status.CollisionCount, 0) + 1)
		if _, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("replica set %s exists with another template; retrying with a new hash", rs.Name)
	case err != nil:
		return nil, fmt.Errorf("create replica set for %s/%s: %w", d.Namespace, d.Name, err)
	}
	c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", out.Name, replicas)
	return out, nil
}

func withLabel(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for a, b := range m {
		out[a] = b
	}
	out[k] = v
	return out
}

func (c *Controller) scale(ctx context.Context, d *appsv1.Deployment, rs *appsv1.ReplicaSet, to int32) error {
	from := ptr.Deref(rs.Spec.Replicas, 0)
	surge, _ := resolveFenceposts(d)
	desired := strconv.Itoa(int(ptr.Deref(d.Spec.Replicas, 1)))
	maxR := strconv.Itoa(int(ptr.Deref(d.Spec.Replicas, 1) + surge))
	if from == to && rs.Annotations[DesiredReplicasAnnotation] == desired && rs.Annotations[MaxReplicasAnnotation] == maxR {
		return nil
	}
	upd := rs.DeepCopy()
	upd.Spec.Replicas = ptr.To(to)
	upd.Annotations = withLabel(upd.Annotations, DesiredReplicasAnnotation, desired)
	upd.Annotations[MaxReplicasAnnotation] = maxR
	if _, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("scale replica set %s: %w", rs.Name, err)
	}
	if from != to {
		dir := "up"
		if to < from {
			dir = "down"
		}
		c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", dir, rs.Name, from, to)
	}
	return nil
}

func (c *Controller) rollingUpdate(ctx context.Context, d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) error {
	if err := c.scale(ctx, d, newRS, newReplicasForRollingUpdate(d, all, newRS)); err != nil {
		return err
	}
	for rs, to := range oldScaleDowns(d, all, old, newRS) {
		if err := c.scale(ctx, d, rs, to); err != nil {
			return err
		}
	}
	return nil
}

// recreate scales the old replica sets to zero, waits until their pods
// are gone, then scales the new one up.
func (c *Controller) recreate(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) error {
	oldPods := false
	for _, rs := range old {
		if err := c.scale(ctx, d, rs, 0); err != nil {
			return err
		}
		pods, _ := c.pods.Pods(rs.Namespace).List(labels.Everything())
		for _, p := range pods {
			if metav1.IsControlledBy(p, rs) && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				oldPods = true
			}
		}
	}
	if oldPods {
		return nil // pod deletions bring us back
	}
	return c.scale(ctx, d, newRS, ptr.Deref(d.Spec.Replicas, 1))
}

// cleanup deletes the oldest empty replica sets beyond the revision
// history limit.
func (c *Controller) cleanup(ctx context.Context, d *appsv1.Deployment, old []*appsv1.ReplicaSet) error {
	limit := int(ptr.Deref(d.Spec.RevisionHistoryLimit, 10))
	var empty []*appsv1.ReplicaSet
	for _, rs := range old {
		if ptr.Deref(rs.Spec.Replicas, 0) == 0 && rs.Status.Replicas == 0 && rs.DeletionTimestamp == nil {
			empty = append(empty, rs)
		}
	}
	sort.Slice(empty, func(i, j int) bool { return revisionOf(empty[i]) < revisionOf(empty[j]) })
	for i := 0; i < len(empty)-limit; i++ {
		err := c.client.AppsV1().ReplicaSets(d.Namespace).Delete(ctx, empty[i].Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

func (c *Controller) updateStatus(ctx context.Context, d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (time.Duration, error) {
	want := ptr.Deref(d.Spec.Replicas, 1)
	st := appsv1.DeploymentStatus{ObservedGeneration: d.Generation, CollisionCount: d.Status.CollisionCount}
	for _, rs := range all {
		st.Replicas += rs.Status.Replicas
		st.ReadyReplicas += rs.Status.ReadyReplicas
		st.AvailableReplicas += rs.Status.AvailableReplicas
	}
	if newRS != nil {
		st.UpdatedReplicas = newRS.Status.Replicas
	}
	st.UnavailableReplicas = max(st.Replicas-st.AvailableReplicas, want-st.AvailableReplicas, 0)
	_, maxUnavailable := resolveFenceposts(d)
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		maxUnavailable = 0
	}
	now := metav1.Now()
	available := corev1.ConditionFalse
	availReason, availMsg := "MinimumReplicasUnavailable", "Deployment does not have minimum availability."
	if st.AvailableReplicas >= want-maxUnavailable {
		available, availReason, availMsg = corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability."
	}
	st.Conditions = setCondition(d.Status.Conditions, appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable,
		Status: available, Reason: availReason, Message: availMsg, LastUpdateTime: now, LastTransitionTime: now})
	complete := newRS != nil && st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want
	var requeue time.Duration
	progressing := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue,
		LastUpdateTime: now, LastTransitionTime: now}
	switch {
	case newRS == nil:
		progressing.Reason, progressing.Message = "NewReplicaSetCreated", "Waiting for the new replica set"
	case complete:
		progressing.Reason = "NewReplicaSetAvailable"
		progressing.Message = fmt.Sprintf("ReplicaSet %q has successfully progressed.", newRS.Name)
	default:
		progressing.Reason = "ReplicaSetUpdated"
		progressing.Message = fmt.Sprintf("ReplicaSet %q is progressing.", newRS.Name)
		deadline := time.Duration(ptr.Deref(d.Spec.ProgressDeadlineSeconds, 600)) * time.Second
		if prev := getCondition(d.Status.Conditions, appsv1.DeploymentProgressing); prev != nil && prev.Reason == "ReplicaSetUpdated" {
			if since := time.Since(prev.LastUpdateTime.Time); since > deadline && !prev.LastUpdateTime.IsZero() && statusUnchanged(d, st) {
				progressing.Status, progressing.Reason = corev1.ConditionFalse, "ProgressDeadlineExceeded"
				progressing.Message = fmt.Sprintf("ReplicaSet %q has timed out progressing.", newRS.Name)
			} else {
				requeue = deadline - since + time.Second
			}
		}
	}
	st.Conditions = setCondition(st.Conditions, progressing)
	if apiequality.Semantic.DeepEqual(withoutTimes(st), withoutTimes(d.Status)) {
		return requeue, nil
	}
	upd := d.DeepCopy()
	upd.Status = st
	_, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return 0, nil
	}
	return requeue, err
}

func statusUnchanged(d *appsv1.Deployment, st appsv1.DeploymentStatus) bool {
	return d.Status.UpdatedReplicas == st.UpdatedReplicas && d.Status.AvailableReplicas == st.AvailableReplicas
}

func getCondition(conds []appsv1.DeploymentCondition, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// setCondition replaces the condition of c's type, keeping its times when
// nothing but times changed.
func setCondition(conds []appsv1.DeploymentCondition, c appsv1.DeploymentCondition) []appsv1.DeploymentCondition {
	out := make([]appsv1.DeploymentCondition, 0, len(conds)+1)
	for _, old := range conds {
		if old.Type != c.Type {
			out = append(out, old)
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
			if old.Reason == c.Reason && old.Message == c.Message {
				c.LastUpdateTime = old.LastUpdateTime
			}
		}
	}
	return append(out, c)
}

func withoutTimes(st appsv1.DeploymentStatus) appsv1.DeploymentStatus {
	st = *st.DeepCopy()
	for i := range st.Conditions {
		st.Conditions[i].LastUpdateTime = metav1.Time{}
		st.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	sort.Slice(st.Conditions, func(i, j int) bool { return st.Conditions[i].Type < st.Conditions[j].Type })
	return st
}
