package apps

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/core"
)

// DaemonSet describes apps/v1 DaemonSets.
var DaemonSet = &registry.Kind{
	Resource:   schema.GroupResource{Group: "apps", Resource: "daemonsets"},
	Singular:   "daemonset",
	Version:    "v1",
	Namespaced: true,
	New:        func() runtime.Object { return &appsv1.DaemonSet{} },
	NewList:    func() runtime.Object { return &appsv1.DaemonSetList{} },
	ShortNames: []string{"ds"},
	Categories: []string{"all"},
	Status:     true,
	Generation: true,
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		d := obj.(*appsv1.DaemonSet)
		errs := registry.ValidateMeta(d, true, registry.DNS1123Domain)
		spec := field.NewPath("spec")
		errs = append(errs, core.ValidateTemplate(nil, d.Spec.Selector, &d.Spec.Template, spec)...)
		switch s := d.Spec.UpdateStrategy; s.Type {
		case appsv1.OnDeleteDaemonSetStrategyType:
		case appsv1.RollingUpdateDaemonSetStrategyType:
			errs = append(errs, validateRollingUpdateDaemonSet(s.RollingUpdate, spec.Child("updateStrategy", "rollingUpdate"))...)
		default:
			errs = append(errs, field.NotSupported(spec.Child("updateStrategy", "type"), s.Type,
				[]string{string(appsv1.RollingUpdateDaemonSetStrategyType), string(appsv1.OnDeleteDaemonSetStrategyType)}))
		}
		errs = append(errs, validateNonnegative(int64(d.Spec.MinReadySeconds), spec.Child("minReadySeconds"))...)
		if l := d.Spec.RevisionHistoryLimit; l != nil {
			errs = append(errs, validateNonnegative(int64(*l), spec.Child("revisionHistoryLimit"))...)
		}
		return errs
	},
	ValidateUpdate: func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		return validateSelectorImmutable(obj.(*appsv1.DaemonSet).Spec.Selector, old.(*appsv1.DaemonSet).Spec.Selector)
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Desired", Type: "integer", Description: "The total number of nodes that should be running the daemon pod."},
			{Name: "Current", Type: "integer", Description: "The number of nodes running at least one daemon pod and are supposed to."},
			{Name: "Ready", Type: "integer", Description: "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready."},
			{Name: "Up-to-date", Type: "integer", Description: "The total number of nodes that are running updated daemon pod."},
			{Name: "Available", Type: "integer", Description: "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available."},
			{Name: "Node Selector", Description: "NodeSelector is a selector which must be true for the pod to fit on a node."},
			registry.AgeColumn,
			core.ContainersColumn, core.ImagesColumn,
		},
		Row: func(obj runtime.Object) []any {
			d := obj.(*appsv1.DaemonSet)
			names, images := core.ContainerColumns(&d.Spec.Template.Spec)
			sel := "<none>"
			if len(d.Spec.Template.Spec.NodeSelector) > 0 {
				sel = ""
				for k, v := range d.Spec.Template.Spec.NodeSelector {
					if sel != "" {
						sel += ","
					}
					sel += k + "=" + v
				}
			}
			st := d.Status
			return []any{int64(st.DesiredNumberScheduled), int64(st.CurrentNumberScheduled), int64(st.NumberReady),
				int64(st.UpdatedNumberScheduled), int64(st.NumberAvailable), sel, registry.CreationAge(d), names, images}
		},
	},
}

// validateRollingUpdateDaemonSet checks a DaemonSet's rolling update as
// kube-apiserver does: counts or percentages up to 100%, and exactly one
// of maxUnavailable and maxSurge not zero.
func validateRollingUpdateDaemonSet(ru *appsv1.RollingUpdateDaemonSet, path *field.Path) field.ErrorList {
	if ru == nil {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	for _, f := range []struct {
		name string
		v    *intstr.IntOrString
	}{{"maxUnavailable", ru.MaxUnavailable}, {"maxSurge", ru.MaxSurge}} {
		errs = append(errs, validateIntOrPercent(f.v, path.Child(f.name))...)
		errs = append(errs, notAbove100Percent(f.v, path.Child(f.name))...)
	}
	unavailable, surge := intOrPercentValue(ru.MaxUnavailable) != 0, intOrPercentValue(ru.MaxSurge) != 0
	switch {
	case unavailable && surge:
		errs = append(errs, field.Invalid(path.Child("maxSurge"), ru.MaxSurge, "may not be set when maxUnavailable is non-zero"))
	case !unavailable && !surge:
		errs = append(errs, field.Required(path.Child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
	}
	return errs
}
