// Package apps is the registry of apps/v1 Deployments and ReplicaSets,
// with their scale subresources.
package apps

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/core"
)

// Deployment describes apps/v1 Deployments.
var Deployment = &registry.Kind{
	Resource:   schema.GroupResource{Group: "apps", Resource: "deployments"},
	Singular:   "deployment",
	Version:    "v1",
	Namespaced: true,
	New:        func() runtime.Object { return &appsv1.Deployment{} },
	NewList:    func() runtime.Object { return &appsv1.DeploymentList{} },
	ShortNames: []string{"deploy"},
	Categories: []string{"all"},
	Status:     true,
	Generation: true,
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		d := obj.(*appsv1.Deployment)
		errs := registry.ValidateMeta(d, true, registry.DNS1123Domain)
		spec := field.NewPath("spec")
		errs = append(errs, core.ValidateTemplate(d.Spec.Replicas, d.Spec.Selector, &d.Spec.Template, spec)...)
		errs = append(errs, validateStrategy(&d.Spec.Strategy, spec.Child("strategy"))...)
		errs = append(errs, validateNonnegative(int64(d.Spec.MinReadySeconds), spec.Child("minReadySeconds"))...)
		if l := d.Spec.RevisionHistoryLimit; l != nil && *l < 0 {
			errs = append(errs, field.Invalid(spec.Child("revisionHistoryLimit"), *l, "must be greater than or equal to 0"))
		}
		if p := d.Spec.ProgressDeadlineSeconds; p != nil && *p <= d.Spec.MinReadySeconds {
			errs = append(errs, field.Invalid(spec.Child("progressDeadlineSeconds"), *p, "must be greater than minReadySeconds"))
		}
		return errs
	},
	ValidateUpdate: func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		return validateSelectorImmutable(obj.(*appsv1.Deployment).Spec.Selector, old.(*appsv1.Deployment).Spec.Selector)
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Ready", Description: "Number of the pod with ready state"},
			{Name: "Up-to-date", Type: "integer", Description: "Total number of non-terminated pods targeted by this deployment that have the desired template spec."},
			{Name: "Available", Type: "integer", Description: "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."},
			registry.AgeColumn,
			core.ContainersColumn, core.ImagesColumn,
			{Name: "Selector", Wide: true, Description: "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment."},
		},
		Row: func(obj runtime.Object) []any {
			d := obj.(*appsv1.Deployment)
			names, images := core.ContainerColumns(&d.Spec.Template.Spec)
			return []any{fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, replicas(d.Spec.Replicas)),
				int64(d.Status.UpdatedReplicas), int64(d.Status.AvailableReplicas), registry.CreationAge(d),
				names, images, selectorString(d.Spec.Selector)}
		},
	},
}

// ReplicaSet describes apps/v1 ReplicaSets.
var ReplicaSet = &registry.Kind{
	Resource:   schema.GroupResource{Group: "apps", Resource: "replicasets"},
	Singular:   "replicaset",
	Version:    "v1",
	Namespaced: true,
	New:        func() runtime.Object { return &appsv1.ReplicaSet{} },
	NewList:    func() runtime.Object { return &appsv1.ReplicaSetList{} },
	ShortNames: []string{"rs"},
	Categories: []string{"all"},
	Status:     true,
	Generation: true,
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		rs := obj.(*appsv1.ReplicaSet)
		errs := registry.ValidateMeta(rs, true, registry.DNS1123Domain)
		spec := field.NewPath("spec")
		errs = append(errs, core.ValidateTemplate(rs.Spec.Replicas, rs.Spec.Selector, &rs.Spec.Template, spec)...)
		return append(errs, validateNonnegative(int64(rs.Spec.MinReadySeconds), spec.Child("minReadySeconds"))...)
	},
	ValidateUpdate: func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		return validateSelectorImmutable(obj.(*appsv1.ReplicaSet).Spec.Selector, old.(*appsv1.ReplicaSet).Spec.Selector)
	},
	Fields: func(obj runtime.Object) fields.Set {
		return fields.Set{"status.replicas": fmt.Sprint(obj.(*appsv1.ReplicaSet).Status.Replicas)}
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Desired", Type: "integer", Description: "Replicas is the number of desired replicas."},
			{Name: "Current", Type: "integer", Description: "Replicas is the most recently observed number of replicas."},
			{Name: "Ready", Type: "integer", Description: "The number of ready replicas for this replica set."},
			registry.AgeColumn,
			core.ContainersColumn, core.ImagesColumn,
			{Name: "Selector", Wide: true, Description: "Selector is a label query over pods that should match the replica count."},
		},
		Row: func(obj runtime.Object) []any {
			rs := obj.(*appsv1.ReplicaSet)
			names, images := core.ContainerColumns(&rs.Spec.Template.Spec)
			return []any{int64(replicas(rs.Spec.Replicas)), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas),
				registry.CreationAge(rs), names, images, selectorString(rs.Spec.Selector)}
		},
	},
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func validateStrategy(s *appsv1.DeploymentStrategy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			errs = append(errs, field.Forbidden(path.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'"))
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		if ru := s.RollingUpdate; ru != nil {
			rp := path.Child("rollingUpdate")
			errs = append(errs, validateIntOrPercent(ru.MaxUnavailable, rp.Child("maxUnavailable"))...)
			errs = append(errs, validateIntOrPercent(ru.MaxSurge, rp.Child("maxSurge"))...)
			if intOrPercentValue(ru.MaxUnavailable) == 0 && intOrPercentValue(ru.MaxSurge) == 0 {
				errs = append(errs, field.Invalid(rp.Child("maxUnavailable"), ru.MaxUnavailable, "may not be 0 when `maxSurge` is 0"))
			}
			errs = append(errs, notAbove100Percent(ru.MaxUnavailable, rp.Child("maxUnavailable"))...)
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("type"), s.Type, []string{"Recreate", "RollingUpdate"}))
	}
	return errs
}

// validateNonnegative is kube-apiserver's ValidateNonnegativeField.
func validateNonnegative(v int64, path *field.Path) field.ErrorList {
	if v < 0 {
		return field.ErrorList{field.Invalid(path, v, "must be greater than or equal to 0")}
	}
	return nil
}

// validateIntOrPercent checks a rolling update's count as kube-apiserver's
// ValidatePositiveIntOrPercent: a non-negative integer, or digits and a
// '%' sign.
func validateIntOrPercent(v *intstr.IntOrString, path *field.Path) field.ErrorList {
	switch {
	case v == nil:
		return nil
	case v.Type == intstr.String:
		return registry.InvalidEach(path, v.StrVal, validation.IsValidPercent(v.StrVal))
	default:
		return validateNonnegative(int64(v.IntVal), path)
	}
}

// percent returns the value of a valid percentage.
func percent(v *intstr.IntOrString) (int, bool) {
	if v == nil || v.Type != intstr.String || len(validation.IsValidPercent(v.StrVal)) > 0 {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	return n, err == nil
}

// intOrPercentValue is the number or percentage v gives, as
// kube-apiserver reads it: 0 when unset, a string that is no percentage
// read as an integer (0 when it is none).
func intOrPercentValue(v *intstr.IntOrString) int {
	if n, ok := percent(v); ok {
		return n
	}
	if v == nil {
		return 0
	}
	return v.IntValue()
}

func notAbove100Percent(v *intstr.IntOrString, path *field.Path) field.ErrorList {
	if n, ok := percent(v); ok && n > 100 {
		return field.ErrorList{field.Invalid(path, v.StrVal, "must not be greater than 100%")}
	}
	return nil
}

func validateSelectorImmutable(sel, old *metav1.LabelSelector) field.ErrorList {
	return apimachineryvalidation.ValidateImmutableField(sel, old, field.NewPath("spec", "selector"))
}

func selectorString(sel *metav1.LabelSelector) string {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return "<error>"
	}
	if s.Empty() {
		return "<none>"
	}
	return s.String()
}
