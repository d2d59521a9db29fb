package apiserver

import (
	"context"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/svcnet/svcnet/internal/rbac"
)

// escalation keeps RBAC from being a way around RBAC, as kube-apiserver's
// RBAC storage does: a user may write a Role or ClusterRole only with
// rules they hold themselves (or with the "escalate" verb on it), and
// bind a role only if they hold its rules (or the "bind" verb on it).
type escalation struct {
	*admission.Handler
	authz *Authorizer
}

var _ admission.ValidationInterface = (*escalation)(nil)

func newEscalation(z *Authorizer) *escalation {
	return &escalation{Handler: admission.NewHandler(admission.Create, admission.Update), authz: z}
}

// Validate implements admission.ValidationInterface.
func (e *escalation) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().Group != rbacv1.GroupName || a.GetSubresource() != "" || e.authz.RBAC == nil {
		return nil
	}
	u := a.GetUserInfo()
	if u == nil {
		return admission.NewForbidden(a, fmt.Errorf("no user"))
	}
	ns := a.GetNamespace()
	var granted []rbacv1.PolicyRule
	var via string // the verb that would allow it outright
	var onResource, onName string
	var ref *rbacv1.RoleRef // a binding's role
	switch obj := a.GetObject().(type) {
	case *rbacv1.Role:
		granted, via, onResource, onName = obj.Rules, "escalate", "roles", obj.Name
	case *rbacv1.ClusterRole:
		granted, via, onResource, onName = obj.Rules, "escalate", "clusterroles", obj.Name
		// An aggregated role may gather any role's rules: writing one
		// takes every permission (or escalate), as in Kubernetes.
		if obj.AggregationRule != nil {
			granted = []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}
		}
	case *rbacv1.RoleBinding:
		via, onName, onResource = "bind", obj.RoleRef.Name, "roles"
		if obj.RoleRef.Kind == "ClusterRole" {
			onResource = "clusterroles"
		}
		ref = &obj.RoleRef
	case *rbacv1.ClusterRoleBinding:
		via, onResource, onName, ref = "bind", "clusterroles", obj.RoleRef.Name, &obj.RoleRef
	default:
		return nil
	}
	// The verb first, as kube-apiserver: who may bind a role needs not
	// have its rules, nor the role be known yet (a manifest's role and
	// binding created one after the other).
	if e.allowed(ctx, u, authorizer.AttributesRecord{User: u, Verb: via, Namespace: ns, APIGroup: rbacv1.GroupName,
		Resource: onResource, Name: onName, ResourceRequest: true}) {
		return nil
	}
	if ref != nil {
		rules, err := e.refRules(*ref, ns)
		if err != nil {
			return admission.NewForbidden(a, err)
		}
		granted = rules
	}
	held, _ := e.authz.RBAC.RulesFor(u, ns)
	if ok, missing := rbac.Covers(held, granted); !ok {
		lines := make([]string, len(missing))
		for i, m := range missing {
			lines[i] = ruleString(m)
		}
		return admission.NewForbidden(a, fmt.Errorf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s",
			u.GetName(), u.GetGroups(), strings.Join(lines, "\n")))
	}
	return nil
}

func (e *escalation) allowed(ctx context.Context, u user.Info, attrs authorizer.AttributesRecord) bool {
	d, _, err := e.authz.Authorize(ctx, attrs)
	return err == nil && d == authorizer.DecisionAllow
}

// refRules are the rules of the role a binding refers to (an unknown kind
// is left to validation, which rejects it after admission).
func (e *escalation) refRules(ref rbacv1.RoleRef, ns string) ([]rbacv1.PolicyRule, error) {
	if ref.Kind != "ClusterRole" && ref.Kind != "Role" {
		return nil, nil
	}
	rules, err := e.authz.RBAC.RoleRules(ref, ns)
	if err != nil {
		return nil, fmt.Errorf("cannot bind %s %q: %w", ref.Kind, ref.Name, err)
	}
	return rules, nil
}

func ruleString(r rbacv1.PolicyRule) string {
	var parts []string
	if len(r.APIGroups) > 0 {
		parts = append(parts, fmt.Sprintf("APIGroups:%q", r.APIGroups))
	}
	if len(r.Resources) > 0 {
		parts = append(parts, fmt.Sprintf("Resources:%q", r.Resources))
	}
	if len(r.ResourceNames) > 0 {
		parts = append(parts, fmt.Sprintf("ResourceNames:%q", r.ResourceNames))
	}
	if len(r.NonResourceURLs) > 0 {
		parts = append(parts, fmt.Sprintf("NonResourceURLs:%q", r.NonResourceURLs))
	}
	parts = append(parts, fmt.Sprintf("Verbs:%q", r.Verbs))
	return "{" + strings.Join(parts, ", ") + "}"
}
