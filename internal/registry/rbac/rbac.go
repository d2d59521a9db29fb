// Package rbac is the registry of rbac.authorization.k8s.io/v1: Roles,
// ClusterRoles and their bindings, validated as kube-apiserver validates
// them.
package rbac

import (
	"context"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// Names of RBAC objects may be any path segment ("system:node"), as in
// Kubernetes.
func validName(name string, _ bool) []string { return content.IsPathSegmentName(name) }

func validateRules(rules []rbacv1.PolicyRule, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range rules {
		rp := p.Index(i)
		if len(r.Verbs) == 0 {
			errs = append(errs, field.Required(rp.Child("verbs"), "verbs must contain at least one value"))
		}
		if len(r.NonResourceURLs) > 0 {
			if namespaced {
				errs = append(errs, field.Invalid(rp.Child("nonResourceURLs"), r.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
			}
			if len(r.APIGroups) > 0 || len(r.Resources) > 0 || len(r.ResourceNames) > 0 {
				errs = append(errs, field.Invalid(rp.Child("nonResourceURLs"), r.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
			}
			for j, u := range r.NonResourceURLs {
				if !strings.HasPrefix(u, "/") && u != rbacv1.NonResourceAll {
					errs = append(errs, field.Invalid(rp.Child("nonResourceURLs").Index(j), u, "must start with /"))
				}
			}
			continue
		}
		if len(r.APIGroups) == 0 {
			errs = append(errs, field.Required(rp.Child("apiGroups"), "resource rules must supply at least one api group"))
		}
		if len(r.Resources) == 0 {
			errs = append(errs, field.Required(rp.Child("resources"), "resource rules must supply at least one resource"))
		}
	}
	return errs
}

func validateRoleRef(ref rbacv1.RoleRef, clusterOnly bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(p.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	kinds := []string{"Role", "ClusterRole"}
	if clusterOnly {
		kinds = kinds[1:]
	}
	if ref.Kind != "ClusterRole" && (clusterOnly || ref.Kind != "Role") {
		errs = append(errs, field.NotSupported(p.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		errs = append(errs, registry.InvalidEach(p.Child("name"), ref.Name, validName(ref.Name, false))...)
	}
	return errs
}

func validateSubjects(subjects []rbacv1.Subject, clusterScoped bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range subjects {
		sp := p.Index(i)
		if s.Name == "" {
			errs = append(errs, field.Required(sp.Child("name"), ""))
		}
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			if s.APIGroup != "" {
				errs = append(errs, field.NotSupported(sp.Child("apiGroup"), s.APIGroup, []string{""}))
			}
			if s.Name != "" {
				errs = append(errs, registry.InvalidEach(sp.Child("name"), s.Name, registry.DNS1123Domain(s.Name, false))...)
			}
			if clusterScoped && s.Namespace == "" {
				errs = append(errs, field.Required(sp.Child("namespace"), ""))
			}
		case rbacv1.UserKind, rbacv1.GroupKind:
			if s.APIGroup != rbacv1.GroupName {
				errs = append(errs, field.NotSupported(sp.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
			}
		default:
			errs = append(errs, field.NotSupported(sp.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
		}
	}
	return errs
}

func immutableRoleRef(now, old rbacv1.RoleRef) field.ErrorList {
	if now != old {
		return field.ErrorList{field.Invalid(field.NewPath("roleRef"), now, "cannot change roleRef")}
	}
	return nil
}

// defaultBinding fills what kube-apiserver defaults: the roleRef's group
// and the group of User and Group subjects.
func defaultBinding(ref *rbacv1.RoleRef, subjects []rbacv1.Subject) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
	for i := range subjects {
		if subjects[i].APIGroup == "" && (subjects[i].Kind == rbacv1.UserKind || subjects[i].Kind == rbacv1.GroupKind) {
			subjects[i].APIGroup = rbacv1.GroupName
		}
	}
}

var createdAt = registry.Column{Name: "Created At", Type: "date", Description: "Time at which the object was created"}

func roleRefColumn(ref rbacv1.RoleRef) string { return ref.Kind + "/" + ref.Name }

// subjectColumns are kubectl's wide columns of a binding.
func subjectColumns(subjects []rbacv1.Subject) []any {
	var users, groups, sas []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		case rbacv1.ServiceAccountKind:
			sas = append(sas, s.Namespace+"/"+s.Name)
		}
	}
	return []any{strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}
}

var bindingColumns = []registry.Column{
	{Name: "Role", Description: "Role referenced by this binding"},
	registry.AgeColumn,
	{Name: "Users", Description: "Users in the binding", Wide: true},
	{Name: "Groups", Description: "Groups in the binding", Wide: true},
	{Name: "ServiceAccounts", Description: "ServiceAccounts in the binding", Wide: true},
}

func gr(resource string) schema.GroupResource {
	return schema.GroupResource{Group: rbacv1.GroupName, Resource: resource}
}

// Role describes Roles.
var Role = &registry.Kind{
	Resource: gr("roles"), Singular: "role", Version: "v1", Namespaced: true,
	New:     func() runtime.Object { return &rbacv1.Role{} },
	NewList: func() runtime.Object { return &rbacv1.RoleList{} },
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		r := obj.(*rbacv1.Role)
		return append(registry.ValidateMeta(r, true, validName), validateRules(r.Rules, true, field.NewPath("rules"))...)
	},
	Table: &registry.Table{Columns: []registry.Column{createdAt}, Row: func(obj runtime.Object) []any {
		return []any{obj.(*rbacv1.Role).CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")}
	}},
}

// ClusterRole describes ClusterRoles.
var ClusterRole = &registry.Kind{
	Resource: gr("clusterroles"), Singular: "clusterrole", Version: "v1",
	New:     func() runtime.Object { return &rbacv1.ClusterRole{} },
	NewList: func() runtime.Object { return &rbacv1.ClusterRoleList{} },
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		r := obj.(*rbacv1.ClusterRole)
		errs := append(registry.ValidateMeta(r, false, validName), validateRules(r.Rules, false, field.NewPath("rules"))...)
		if a := r.AggregationRule; a != nil && len(a.ClusterRoleSelectors) == 0 {
			errs = append(errs, field.Required(field.NewPath("aggregationRule", "clusterRoleSelectors"), "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		return errs
	},
	Table: &registry.Table{Columns: []registry.Column{createdAt}, Row: func(obj runtime.Object) []any {
		return []any{obj.(*rbacv1.ClusterRole).CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")}
	}},
}

// RoleBinding describes RoleBindings.
var RoleBinding = bindingKind("rolebindings", "rolebinding", true,
	func() runtime.Object { return &rbacv1.RoleBinding{} },
	func() runtime.Object { return &rbacv1.RoleBindingList{} },
	func(obj runtime.Object) (*rbacv1.RoleRef, []rbacv1.Subject) {
		b := obj.(*rbacv1.RoleBinding)
		return &b.RoleRef, b.Subjects
	})

// ClusterRoleBinding describes ClusterRoleBindings.
var ClusterRoleBinding = bindingKind("clusterrolebindings", "clusterrolebinding", false,
	func() runtime.Object { return &rbacv1.ClusterRoleBinding{} },
	func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
	func(obj runtime.Object) (*rbacv1.RoleRef, []rbacv1.Subject) {
		b := obj.(*rbacv1.ClusterRoleBinding)
		return &b.RoleRef, b.Subjects
	})

// bindingKind describes RoleBindings (namespaced) or ClusterRoleBindings:
// the same fields, defaulted and checked alike, but that a cluster-wide
// binding may refer to ClusterRoles only and needs its service accounts'
// namespaces. parts gives a binding's roleRef and subjects.
func bindingKind(resource, singular string, namespaced bool, newObj, newList func() runtime.Object,
	parts func(runtime.Object) (*rbacv1.RoleRef, []rbacv1.Subject)) *registry.Kind {
	return &registry.Kind{
		Resource: gr(resource), Singular: singular, Version: "v1", Namespaced: namespaced,
		New:     newObj,
		NewList: newList,
		PrepareForCreate: func(_ context.Context, obj runtime.Object) {
			defaultBinding(parts(obj))
		},
		PrepareForUpdate: func(_ context.Context, obj, _ runtime.Object) {
			defaultBinding(parts(obj))
		},
		Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
			ref, subjects := parts(obj)
			errs := registry.ValidateMeta(obj, namespaced, validName)
			errs = append(errs, validateRoleRef(*ref, !namespaced, field.NewPath("roleRef"))...)
			return append(errs, validateSubjects(subjects, !namespaced, field.NewPath("subjects"))...)
		},
		ValidateUpdate: func(_ context.Context, obj, old runtime.Object) field.ErrorList {
			ref, _ := parts(obj)
			oldRef, _ := parts(old)
			return immutableRoleRef(*ref, *oldRef)
		},
		Table: &registry.Table{Columns: bindingColumns, Row: func(obj runtime.Object) []any {
			ref, subjects := parts(obj)
			return append([]any{roleRefColumn(*ref), registry.CreationAge(obj)}, subjectColumns(subjects)...)
		}},
	}
}

// Kinds are the served RBAC kinds.
var Kinds = []*registry.Kind{Role, ClusterRole, RoleBinding, ClusterRoleBinding}
