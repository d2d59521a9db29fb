package apps

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
)

// ScaleREST serves the scale subresource (autoscaling/v1 Scale) of
// Deployments, ReplicaSets, StatefulSets and ReplicationControllers, as
// `kubectl scale` uses it.
type ScaleREST struct {
	Store *genericregistry.Store
}

// replicasOf reads and writes the replica count of a workload.
func replicasOf(obj runtime.Object) (*int32, *metav1.LabelSelector, int32) {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		if w.Spec.Replicas == nil {
			w.Spec.Replicas = new(int32)
		}
		return w.Spec.Replicas, w.Spec.Selector, w.Status.Replicas
	case *appsv1.ReplicaSet:
		if w.Spec.Replicas == nil {
			w.Spec.Replicas = new(int32)
		}
		return w.Spec.Replicas, w.Spec.Selector, w.Status.Replicas
	case *appsv1.StatefulSet:
		if w.Spec.Replicas == nil {
			w.Spec.Replicas = new(int32)
		}
		return w.Spec.Replicas, w.Spec.Selector, w.Status.Replicas
	case *corev1.ReplicationController:
		if w.Spec.Replicas == nil {
			w.Spec.Replicas = new(int32)
		}
		return w.Spec.Replicas, &metav1.LabelSelector{MatchLabels: w.Spec.Selector}, w.Status.Replicas
	}
	panic(fmt.Sprintf("scale of unexpected type %T", obj))
}

func scaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	m, err := metaOf(obj)
	if err != nil {
		return nil, err
	}
	want, sel, have := replicasOf(obj)
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, fmt.Errorf("invalid label selector: %w", err)
	}
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID,
			ResourceVersion: m.ResourceVersion, CreationTimestamp: m.CreationTimestamp},
		Spec:   autoscalingv1.ScaleSpec{Replicas: *want},
		Status: autoscalingv1.ScaleStatus{Replicas: have, Selector: selector.String()},
	}, nil
}

func metaOf(obj runtime.Object) (*metav1.ObjectMeta, error) {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return &w.ObjectMeta, nil
	case *appsv1.ReplicaSet:
		return &w.ObjectMeta, nil
	case *appsv1.StatefulSet:
		return &w.ObjectMeta, nil
	case *corev1.ReplicationController:
		return &w.ObjectMeta, nil
	}
	return nil, fmt.Errorf("scale of unexpected type %T", obj)
}

func (r *ScaleREST) New() runtime.Object { return &autoscalingv1.Scale{} }
func (r *ScaleREST) Destroy()            {}

// GroupVersionKind tells the API installer that this endpoint speaks Scale.
func (r *ScaleREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
}

func (r *ScaleREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.Store.Get(ctx, name, options)
	if err != nil {
		return nil, err
	}
	return scaleOf(obj)
}

func (r *ScaleREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo,
	createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc,
	_ bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	obj, _, err := r.Store.Update(ctx, name, &scaleUpdate{name: name, req: objInfo}, nil, nil, false, options)
	if err != nil {
		return nil, false, err
	}
	s, err := scaleOf(obj)
	return s, false, err
}

// scaleUpdate turns an update of a Scale into one of its workload.
type scaleUpdate struct {
	name string
	req  rest.UpdatedObjectInfo
}

func (u *scaleUpdate) Preconditions() *metav1.Preconditions { return u.req.Preconditions() }

func (u *scaleUpdate) UpdatedObject(ctx context.Context, oldObj runtime.Object) (runtime.Object, error) {
	obj := oldObj.DeepCopyObject()
	old, err := scaleOf(obj)
	if err != nil {
		return nil, err
	}
	newObj, err := u.req.UpdatedObject(ctx, old)
	if err != nil {
		return nil, err
	}
	s, ok := newObj.(*autoscalingv1.Scale)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected a Scale, got %T", newObj))
	}
	if s.Spec.Replicas < 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: "autoscaling", Kind: "Scale"}, u.name,
			field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), s.Spec.Replicas, "must be greater than or equal to 0")})
	}
	m, _ := metaOf(obj)
	if s.ResourceVersion != "" {
		// A Scale carrying a resourceVersion is a precondition on the workload.
		m.ResourceVersion = s.ResourceVersion
	}
	want, _, _ := replicasOf(obj)
	*want = s.Spec.Replicas
	return obj, nil
}
