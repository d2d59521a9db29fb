package deployment

import (
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Annotations and labels with Kubernetes' names, so kubectl rollout
// commands and users' habits carry over.
const (
	RevisionAnnotation        = "deployment.kubernetes.io/revision"
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	MaxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"
	PodTemplateHashLabel      = appsv1.DefaultDeploymentUniqueLabelKey
)

// sameTemplate compares a replica set's template with the deployment's,
// ignoring the pod-template-hash label the replica set carries.
func sameTemplate(rs *appsv1.ReplicaSet, d *appsv1.Deployment) bool {
	a := rs.Spec.Template.DeepCopy()
	delete(a.Labels, PodTemplateHashLabel)
	b := d.Spec.Template.DeepCopy()
	delete(b.Labels, PodTemplateHashLabel)
	if len(a.Labels) == 0 {
		a.Labels = nil
	}
	if len(b.Labels) == 0 {
		b.Labels = nil
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

// resolveFenceposts turns maxSurge and maxUnavailable into pod counts:
// surge rounds up, unavailable rounds down, and both zero means one may be
// unavailable (as Kubernetes does).
func resolveFenceposts(d *appsv1.Deployment) (surge, unavailable int32) {
	replicas := ptr.Deref(d.Spec.Replicas, 1)
	ru := d.Spec.Strategy.RollingUpdate
	if ru == nil {
		return 1, 0
	}
	scaled := func(v *intstr.IntOrString, roundUp bool) int32 {
		if v == nil {
			return 0
		}
		n, err := intstr.GetScaledValueFromIntOrPercent(v, int(replicas), roundUp)
		if err != nil {
			return 0
		}
		return int32(n)
	}
	surge = scaled(ru.MaxSurge, true)
	unavailable = scaled(ru.MaxUnavailable, false)
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return surge, min(unavailable, replicas)
}

func specReplicas(sets ...*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range sets {
		if rs != nil {
			n += ptr.Deref(rs.Spec.Replicas, 0)
		}
	}
	return n
}

func availableReplicas(sets ...*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range sets {
		if rs != nil {
			n += rs.Status.AvailableReplicas
		}
	}
	return n
}

// newReplicasForRollingUpdate is how many replicas the new replica set may
// have now: up to the surge above the desired count, never above desired.
func newReplicasForRollingUpdate(d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) int32 {
	want := ptr.Deref(d.Spec.Replicas, 1)
	cur := ptr.Deref(newRS.Spec.Replicas, 0)
	if cur >= want {
		return want
	}
	surge, _ := resolveFenceposts(d)
	room := want + surge - specReplicas(all...)
	if room <= 0 {
		return cur
	}
	return cur + min(room, want-cur)
}

// oldScaleDowns decides how far each old replica set shrinks in one step of
// a rolling update, keeping at least desired-maxUnavailable pods
// available. Unavailable pods of old sets go first.
func oldScaleDowns(d *appsv1.Deployment, all, old []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) map[*appsv1.ReplicaSet]int32 {
	out := map[*appsv1.ReplicaSet]int32{}
	if specReplicas(old...) == 0 {
		return out
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	_, maxUnavailable := resolveFenceposts(d)
	minAvailable := want - maxUnavailable
	newUnavailable := ptr.Deref(newRS.Spec.Replicas, 0) - newRS.Status.AvailableReplicas
	budget := specReplicas(all...) - minAvailable - newUnavailable
	if budget <= 0 {
		return out
	}
	sorted := append([]*appsv1.ReplicaSet(nil), old...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].CreationTimestamp.Before(&sorted[j].CreationTimestamp) })
	target := map[*appsv1.ReplicaSet]int32{}
	for _, rs := range sorted {
		target[rs] = ptr.Deref(rs.Spec.Replicas, 0)
	}
	// Unhealthy replicas first: removing them costs no availability.
	for _, rs := range sorted {
		unhealthy := target[rs] - rs.Status.AvailableReplicas
		cut := min(max(unhealthy, 0), budget)
		target[rs] -= cut
		budget -= cut
	}
	// Then available ones, as long as enough stay available.
	canRemove := availableReplicas(all...) - minAvailable
	for _, rs := range sorted {
		if canRemove <= 0 {
			break
		}
		cut := min(target[rs], canRemove)
		target[rs] -= cut
		canRemove -= cut
	}
	for _, rs := range sorted {
		if t := target[rs]; t != ptr.Deref(rs.Spec.Replicas, 0) {
			out[rs] = t
		}
	}
	return out
}

func revisionOf(rs *appsv1.ReplicaSet) int64 {
	v, err := strconv.ParseInt(rs.Annotations[RevisionAnnotation], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

func maxRevision(sets []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range sets {
		m = max(m, revisionOf(rs))
	}
	return m
}
