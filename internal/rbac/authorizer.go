package rbac

import (
	"context"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Lister gives the RBAC objects the decisions are made from.
type Lister interface {
	Role(namespace, name string) (*rbacv1.Role, error)
	ClusterRole(name string) (*rbacv1.ClusterRole, error)
	RoleBindings(namespace string) ([]*rbacv1.RoleBinding, error)
	ClusterRoleBindings() ([]*rbacv1.ClusterRoleBinding, error)
}

// Authorizer allows what a user's bindings grant, and has no opinion on
// anything else (RBAC never denies: another authorizer may allow).
type Authorizer struct {
	Lister Lister
}

// Authorize implements authorizer.Authorizer.
func (z *Authorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	if u == nil {
		return authorizer.DecisionNoOpinion, "no user", nil
	}
	var allowedBy string
	errs := z.visitRules(u, a.GetNamespace(), func(source string, r *rbacv1.PolicyRule) bool {
		if RuleAllows(r, a) {
			allowedBy = source
			return false
		}
		return true
	})
	if allowedBy != "" {
		return authorizer.DecisionAllow, "RBAC: allowed by " + allowedBy, nil
	}
	reason := ""
	if len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		reason = "RBAC: " + strings.Join(msgs, ", ")
	}
	return authorizer.DecisionNoOpinion, reason, nil
}

// RulesFor lists every rule that applies to the user in a namespace
// (cluster-wide ones included; namespace "" gives only those), for
// SelfSubjectRulesReview and escalation checks. Errors name bindings whose
// role is missing; the rules found are still returned.
func (z *Authorizer) RulesFor(u user.Info, namespace string) ([]rbacv1.PolicyRule, []error) {
	var rules []rbacv1.PolicyRule
	errs := z.visitRules(u, namespace, func(_ string, r *rbacv1.PolicyRule) bool {
		rules = append(rules, *r)
		return true
	})
	return rules, errs
}

// visitRules calls visit with every rule bound to the user, ClusterRoleBindings
// first, until visit returns false.
func (z *Authorizer) visitRules(u user.Info, namespace string, visit func(source string, r *rbacv1.PolicyRule) bool) []error {
	var errs []error
	crbs, err := z.Lister.ClusterRoleBindings()
	if err != nil {
		return []error{err}
	}
	for _, b := range crbs {
		if !appliesToAny(b.Subjects, u, "") {
			continue
		}
		rules, err := z.RoleRules(b.RoleRef, "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range rules {
			if !visit(fmt.Sprintf("ClusterRoleBinding %q of ClusterRole %q", b.Name, b.RoleRef.Name), &rules[i]) {
				return nil
			}
		}
	}
	if namespace == "" {
		return errs
	}
	rbs, err := z.Lister.RoleBindings(namespace)
	if err != nil {
		return append(errs, err)
	}
	for _, b := range rbs {
		if !appliesToAny(b.Subjects, u, namespace) {
			continue
		}
		rules, err := z.RoleRules(b.RoleRef, namespace)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range rules {
			if !visit(fmt.Sprintf("RoleBinding %s/%s of %s %q", namespace, b.Name, b.RoleRef.Kind, b.RoleRef.Name), &rules[i]) {
				return nil
			}
		}
	}
	return errs
}

func appliesToAny(subjects []rbacv1.Subject, u user.Info, ns string) bool {
	for i := range subjects {
		if AppliesTo(&subjects[i], u, ns) {
			return true
		}
	}
	return false
}

// RoleRules resolves a roleRef: a ClusterRole, or a Role of the binding's
// namespace.
func (z *Authorizer) RoleRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "ClusterRole":
		r, err := z.Lister.ClusterRole(ref.Name)
		if err != nil {
			return nil, err
		}
		return r.Rules, nil
	case "Role":
		if namespace == "" {
			return nil, fmt.Errorf("a ClusterRoleBinding cannot refer to Role %q", ref.Name)
		}
		r, err := z.Lister.Role(namespace, ref.Name)
		if err != nil {
			return nil, err
		}
		return r.Rules, nil
	}
	return nil, fmt.Errorf("unknown roleRef kind %q", ref.Kind)
}
