package apps

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/core"
)

// StatefulSet describes apps/v1 StatefulSets.
var StatefulSet = &registry.Kind{
	Resource:   schema.GroupResource{Group: "apps", Resource: "statefulsets"},
	Singular:   "statefulset",
	Version:    "v1",
	Namespaced: true,
	New:        func() runtime.Object { return &appsv1.StatefulSet{} },
	NewList:    func() runtime.Object { return &appsv1.StatefulSetList{} },
	ShortNames: []string{"sts"},
	Categories: []string{"all"},
	Status:     true,
	Generation: true,
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		s := obj.(*appsv1.StatefulSet)
		// Pod names are <set>-<ordinal>, and their hostnames must be
		// DNS labels: the set's name is one.
		errs := registry.ValidateMeta(s, true, registry.DNS1123Label)
		spec := field.NewPath("spec")
		errs = append(errs, core.ValidateTemplate(s.Spec.Replicas, s.Spec.Selector, &s.Spec.Template, spec)...)
		switch s.Spec.PodManagementPolicy {
		case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
		default:
			errs = append(errs, field.NotSupported(spec.Child("podManagementPolicy"), s.Spec.PodManagementPolicy,
				[]string{string(appsv1.OrderedReadyPodManagement), string(appsv1.ParallelPodManagement)}))
		}
		us := s.Spec.UpdateStrategy
		switch us.Type {
		case appsv1.OnDeleteStatefulSetStrategyType:
			if us.RollingUpdate != nil {
				errs = append(errs, field.Invalid(spec.Child("updateStrategy", "rollingUpdate"), us.RollingUpdate, "only allowed for updateStrategy 'RollingUpdate'"))
			}
		case appsv1.RollingUpdateStatefulSetStrategyType:
			if ru := us.RollingUpdate; ru != nil {
				if ru.Partition != nil && *ru.Partition < 0 {
					errs = append(errs, field.Invalid(spec.Child("updateStrategy", "rollingUpdate", "partition"), *ru.Partition, "must be greater than or equal to 0"))
				}
				if m := ru.MaxUnavailable; m != nil {
					mp := spec.Child("updateStrategy", "rollingUpdate", "maxUnavailable")
					errs = append(errs, validateIntOrPercent(m, mp)...)
					if intOrPercentValue(m) == 0 {
						errs = append(errs, field.Invalid(mp, m.String(), "cannot be 0"))
					}
					errs = append(errs, notAbove100Percent(m, mp)...)
				}
			}
		default:
			errs = append(errs, field.NotSupported(spec.Child("updateStrategy", "type"), us.Type,
				[]string{string(appsv1.RollingUpdateStatefulSetStrategyType), string(appsv1.OnDeleteStatefulSetStrategyType)}))
		}
		if len(s.Spec.VolumeClaimTemplates) > 0 {
			errs = append(errs, field.Forbidden(spec.Child("volumeClaimTemplates"),
				"svcnet has no PersistentVolumes: volumeClaimTemplates are not supported (use emptyDir or hostPath volumes in the template)"))
		}
		if o := s.Spec.Ordinals; o != nil && o.Start < 0 {
			errs = append(errs, field.Invalid(spec.Child("ordinals", "start"), o.Start, "must be greater than or equal to 0"))
		}
		if l := s.Spec.RevisionHistoryLimit; l != nil && *l < 0 {
			errs = append(errs, field.Invalid(spec.Child("revisionHistoryLimit"), *l, "must be greater than or equal to 0"))
		}
		if s.Spec.MinReadySeconds < 0 {
			errs = append(errs, field.Invalid(spec.Child("minReadySeconds"), s.Spec.MinReadySeconds, "must be greater than or equal to 0"))
		}
		return errs
	},
	ValidateUpdate: func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		s, o := obj.(*appsv1.StatefulSet), old.(*appsv1.StatefulSet)
		// Only what kube-apiserver lets change may change.
		a, b := s.Spec.DeepCopy(), o.Spec.DeepCopy()
		for _, x := range []*appsv1.StatefulSetSpec{a, b} {
			x.Replicas, x.Ordinals, x.Template, x.UpdateStrategy = nil, nil, b.Template, appsv1.StatefulSetUpdateStrategy{}
			x.PersistentVolumeClaimRetentionPolicy, x.MinReadySeconds, x.RevisionHistoryLimit = nil, 0, nil
		}
		if !apiequality.Semantic.DeepEqual(a, b) {
			return field.ErrorList{field.Forbidden(field.NewPath("spec"),
				"updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden")}
		}
		return nil
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Ready", Description: "Number of the pod with ready state"},
			registry.AgeColumn,
			core.ContainersColumn, core.ImagesColumn,
		},
		Row: func(obj runtime.Object) []any {
			s := obj.(*appsv1.StatefulSet)
			names, images := core.ContainerColumns(&s.Spec.Template.Spec)
			return []any{fmt.Sprintf("%d/%d", s.Status.ReadyReplicas, replicas(s.Spec.Replicas)), registry.CreationAge(s), names, images}
		},
	},
}
