package core

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"

	"github.com/svcnet/svcnet/internal/registry"
)

// FinalizerKubernetes is the spec finalizer the namespace controller
// removes once a terminating namespace is empty.
const FinalizerKubernetes corev1.FinalizerName = "kubernetes"

// Namespace describes core/v1 Namespaces.
var Namespace = &registry.Kind{
	Resource:   schema.GroupResource{Resource: "namespaces"},
	Singular:   "namespace",
	Version:    "v1",
	New:        func() runtime.Object { return &corev1.Namespace{} },
	NewList:    func() runtime.Object { return &corev1.NamespaceList{} },
	ShortNames: []string{"ns"},
	Status:     true,
	PrepareForCreate: func(_ context.Context, obj runtime.Object) {
		ns := obj.(*corev1.Namespace)
		ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
		if !slices.Contains(ns.Spec.Finalizers, FinalizerKubernetes) {
			ns.Spec.Finalizers = append(ns.Spec.Finalizers, FinalizerKubernetes)
		}
		setNameLabel(ns)
	},
	PrepareForUpdate: func(_ context.Context, obj, old runtime.Object) {
		ns := obj.(*corev1.Namespace)
		// spec.finalizers change only through the finalize subresource.
		ns.Spec.Finalizers = old.(*corev1.Namespace).Spec.Finalizers
		setNameLabel(ns)
	},
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		return registry.ValidateMeta(obj, false, registry.DNS1123Label)
	},
	Fields: func(obj runtime.Object) fields.Set {
		return fields.Set{"status.phase": string(obj.(*corev1.Namespace).Status.Phase)}
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Status", Description: "The status of the namespace"},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object) []any {
			ns := obj.(*corev1.Namespace)
			return []any{string(ns.Status.Phase), registry.CreationAge(ns)}
		},
	},
}

// setNameLabel keeps the kubernetes.io/metadata.name label kube-apiserver
// puts on every namespace.
func setNameLabel(ns *corev1.Namespace) {
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
}

// NamespaceREST is the namespaces endpoint. Deleting a namespace marks it
// Terminating; it is removed once the namespace controller has deleted its
// contents and cleared its finalizers.
type NamespaceREST struct {
	*registry.REST
}

// Delete starts (or finishes) the deletion of a namespace.
func (r *NamespaceREST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	obj, err := r.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	ns := obj.(*corev1.Namespace)
	if options == nil {
		options = metav1.NewDeleteOptions(0)
	}
	if options.Preconditions != nil {
		if p := options.Preconditions.UID; p != nil && *p != ns.UID {
			return nil, false, apierrors.NewConflict(Namespace.Resource, name,
				fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", *p, ns.UID))
		}
		if p := options.Preconditions.ResourceVersion; p != nil && *p != ns.ResourceVersion {
			return nil, false, apierrors.NewConflict(Namespace.Resource, name,
				fmt.Errorf("precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p, ns.ResourceVersion))
		}
	}
	if deleteValidation != nil {
		if err := deleteValidation(ctx, ns); err != nil {
			return nil, false, err
		}
	}
	if ns.DeletionTimestamp == nil || len(ns.Spec.Finalizers) > 0 {
		if len(options.DryRun) > 0 {
			return ns, false, nil
		}
		key, err := r.KeyFunc(ctx, name)
		if err != nil {
			return nil, false, err
		}
		out := &corev1.Namespace{}
		err = r.Storage.GuaranteedUpdate(ctx, key, out, false, nil,
			storage.SimpleUpdate(func(obj runtime.Object) (runtime.Object, error) {
				ns := obj.(*corev1.Namespace)
				if ns.DeletionTimestamp == nil {
					now := metav1.Now()
					ns.DeletionTimestamp = &now
				}
				ns.Status.Phase = corev1.NamespaceTerminating
				if options.PropagationPolicy != nil && *options.PropagationPolicy == metav1.DeletePropagationOrphan {
					ns.Finalizers = appendOnce(ns.Finalizers, metav1.FinalizerOrphanDependents)
				}
				return ns, nil
			}), false, nil)
		if err != nil {
			return nil, false, err
		}
		if len(out.Spec.Finalizers) > 0 || len(out.Finalizers) > 0 {
			return out, false, nil
		}
	}
	return r.REST.Delete(ctx, name, deleteValidation, options)
}

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// FinalizeREST serves namespaces/finalize: the namespace controller uses
// it to clear spec.finalizers, which lets the namespace go.
type FinalizeREST struct {
	Store *genericregistry.Store
}

func (r *FinalizeREST) New() runtime.Object { return &corev1.Namespace{} }
func (r *FinalizeREST) Destroy()            {}

// Update changes only spec.finalizers; the namespace is deleted when no
// finalizer is left on a terminating namespace.
func (r *FinalizeREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo,
	createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc,
	_ bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	key, err := r.Store.KeyFunc(ctx, name)
	if err != nil {
		return nil, false, err
	}
	out := &corev1.Namespace{}
	err = r.Store.Storage.GuaranteedUpdate(ctx, key, out, false, nil,
		func(existing runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
			old := existing.(*corev1.Namespace)
			obj, err := objInfo.UpdatedObject(ctx, old)
			if err != nil {
				return nil, nil, err
			}
			in := obj.(*corev1.Namespace)
			if in.ResourceVersion != "" && in.ResourceVersion != old.ResourceVersion {
				return nil, nil, apierrors.NewConflict(Namespace.Resource, name,
					fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
			}
			for i, f := range in.Spec.Finalizers {
				if f == "" {
					return nil, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Namespace"}, name,
						field.ErrorList{field.Required(field.NewPath("spec", "finalizers").Index(i), "")})
				}
			}
			if updateValidation != nil {
				if err := updateValidation(ctx, in, old); err != nil {
					return nil, nil, err
				}
			}
			ns := old.DeepCopy()
			ns.Spec.Finalizers = in.Spec.Finalizers
			return ns, nil, nil
		}, len(options.DryRun) > 0, nil)
	if err != nil {
		return nil, false, err
	}
	if out.DeletionTimestamp != nil && len(out.Spec.Finalizers) == 0 && len(out.Finalizers) == 0 && len(options.DryRun) == 0 {
		zero := int64(0)
		if _, _, err := r.Store.Delete(ctx, name, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return nil, false, err
		}
	}
	return out, false, nil
}
