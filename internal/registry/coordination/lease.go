// Package coordination is the registry of coordination.k8s.io/v1 Leases.
package coordination

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// Lease describes coordination.k8s.io/v1 Leases.
var Lease = &registry.Kind{
	Resource:   schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"},
	Singular:   "lease",
	Version:    "v1",
	Namespaced: true,
	New:        func() runtime.Object { return &coordinationv1.Lease{} },
	NewList:    func() runtime.Object { return &coordinationv1.LeaseList{} },
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		l := obj.(*coordinationv1.Lease)
		errs := registry.ValidateMeta(l, true, registry.DNS1123Domain)
		if d := l.Spec.LeaseDurationSeconds; d != nil && *d <= 0 {
			errs = append(errs, field.Invalid(field.NewPath("spec", "leaseDurationSeconds"), *d, "must be greater than 0"))
		}
		if t := l.Spec.LeaseTransitions; t != nil && *t < 0 {
			errs = append(errs, field.Invalid(field.NewPath("spec", "leaseTransitions"), *t, "must be greater than or equal to 0"))
		}
		return errs
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Holder", Description: "The holder of the lease"},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object) []any {
			l := obj.(*coordinationv1.Lease)
			holder := ""
			if l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
			return []any{holder, registry.CreationAge(l)}
		},
	},
}
