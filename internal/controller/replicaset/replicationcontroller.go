package replicaset

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
)

// NewReplicationManager keeps core/v1 ReplicationControllers: the
// ReplicaSet controller working on each one converted to a ReplicaSet
// whose selector is the RC's label map. Pods it creates, adopts and
// events it records name the ReplicationController.
func NewReplicationManager(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *Controller {
	inf := factory.Core().V1().ReplicationControllers()
	return newController("replicationcontroller", client, factory, replicationControllers{client, inf.Lister()}, inf.Informer(), recorder)
}

type replicationControllers struct {
	client kubernetes.Interface
	lister corelisters.ReplicationControllerLister
}

func (replicationControllers) kind() schema.GroupVersionKind {
	return corev1.SchemeGroupVersion.WithKind("ReplicationController")
}

func (r replicationControllers) get(ns, name string) (*appsv1.ReplicaSet, error) {
	rc, err := r.lister.ReplicationControllers(ns).Get(name)
	if err != nil {
		return nil, err
	}
	return asReplicaSet(rc), nil
}

func (r replicationControllers) list(ns string) ([]*appsv1.ReplicaSet, error) {
	rcs, err := r.lister.ReplicationControllers(ns).List(labels.Everything())
	out := make([]*appsv1.ReplicaSet, len(rcs))
	for i, rc := range rcs {
		out[i] = asReplicaSet(rc)
	}
	return out, err
}

func (r replicationControllers) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet) error {
	rc, err := r.lister.ReplicationControllers(rs.Namespace).Get(rs.Name)
	if err != nil {
		return err
	}
	rc = rc.DeepCopy()
	// The status was computed from this version: the update must be
	// refused (a conflict) if the object changed since.
	rc.ResourceVersion = rs.ResourceVersion
	rc.Status = asRCStatus(rs.Status)
	_, err = r.client.CoreV1().ReplicationControllers(rc.Namespace).UpdateStatus(ctx, rc, metav1.UpdateOptions{})
	return err
}

// asReplicaSet is rc as a ReplicaSet. Its type meta stays the RC's, so
// that events recorded on it refer to the ReplicationController. It shares
// rc's maps and template: like the lister's objects it is read only (the
// controller copies before it writes), and it is made on every pod event.
func asReplicaSet(rc *corev1.ReplicationController) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ReplicationController"},
		ObjectMeta: rc.ObjectMeta,
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        rc.Spec.Replicas,
			MinReadySeconds: rc.Spec.MinReadySeconds,
			Selector:        &metav1.LabelSelector{MatchLabels: rc.Spec.Selector},
		},
		Status: appsv1.ReplicaSetStatus{
			Replicas:             rc.Status.Replicas,
			FullyLabeledReplicas: rc.Status.FullyLabeledReplicas,
			ReadyReplicas:        rc.Status.ReadyReplicas,
			AvailableReplicas:    rc.Status.AvailableReplicas,
			ObservedGeneration:   rc.Status.ObservedGeneration,
		},
	}
	if rc.Spec.Template != nil {
		rs.Spec.Template = *rc.Spec.Template
	}
	for _, c := range rc.Status.Conditions {
		rs.Status.Conditions = append(rs.Status.Conditions, appsv1.ReplicaSetCondition{
			Type: appsv1.ReplicaSetConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return rs
}

func asRCStatus(s appsv1.ReplicaSetStatus) corev1.ReplicationControllerStatus {
	out := corev1.ReplicationControllerStatus{
		Replicas:             s.Replicas,
		FullyLabeledReplicas: s.FullyLabeledReplicas,
		ReadyReplicas:        s.ReadyReplicas,
		AvailableReplicas:    s.AvailableReplicas,
		ObservedGeneration:   s.ObservedGeneration,
	}
	for _, c := range s.Conditions {
		out.Conditions = append(out.Conditions, corev1.ReplicationControllerCondition{
			Type: corev1.ReplicationControllerConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return out
}
