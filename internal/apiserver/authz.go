package apiserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/svcnet/svcnet/internal/rbac"
)

// PodNodeFunc returns the node a pod is bound to.
type PodNodeFunc func(ctx context.Context, namespace, name string) (string, error)

// Authorizer decides as kube-apiserver with --authorization-mode=Node,RBAC:
// system:masters may do anything; node agents get the Node authorizer's
// share; everyone else what their RBAC bindings grant.
type Authorizer struct {
	// PodNode looks up where a pod runs, for the node rules.
	PodNode PodNodeFunc
	// RBAC decides by Roles and bindings.
	RBAC *rbac.Authorizer
	// rbacSynced reports whether RBAC's objects are loaded; until they
	// are, a request waits for them (briefly) rather than being denied.
	rbacSynced func(ctx context.Context) bool
}

var writeEvents = rbacv1.PolicyRule{Verbs: []string{"create", "update", "patch"}, APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}}

// Authorize implements authorizer.Authorizer.
func (z *Authorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	if u == nil {
		return authorizer.DecisionDeny, "no user", nil
	}
	groups := u.GetGroups()
	if slices.Contains(groups, user.SystemPrivilegedGroup) {
		return authorizer.DecisionAllow, "", nil
	}
	if node, ok := nodeOf(u); ok && a.IsResourceRequest() {
		if d, reason, err := z.authorizeNode(ctx, node, a); d != authorizer.DecisionNoOpinion || err != nil {
			return d, reason, err
		}
	}
	if z.RBAC == nil {
		return authorizer.DecisionNoOpinion, "", nil
	}
	if z.rbacSynced != nil && !z.rbacSynced(ctx) {
		return authorizer.DecisionNoOpinion, "RBAC: the roles and bindings are not loaded yet", nil
	}
	return z.RBAC.Authorize(ctx, a)
}

// authorizeNode is the node agent's share, like kube-apiserver's Node
// authorizer: read the cluster, write its own Node, Lease and the status
// of the pods bound to it.
func (z *Authorizer) authorizeNode(ctx context.Context, node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	verb, res, sub := a.GetVerb(), a.GetResource(), a.GetSubresource()
	if a.GetAPIGroup() == "" && res == "secrets" && a.GetVerb() == "list" {
		return authorizer.DecisionDeny, "nodes may not list secrets", nil
	}
	if slices.Contains(readVerbs, verb) {
		return authorizer.DecisionAllow, "", nil
	}
	switch {
	case rbac.RuleAllows(&writeEvents, a):
		return authorizer.DecisionAllow, "", nil
	case a.GetAPIGroup() == "" && res == "serviceaccounts" && sub == "token" && verb == "create":
		// The tokens of its pods' ServiceAccounts; TokenRequest checks
		// that the token is bound to a pod of this node.
		return authorizer.DecisionAllow, "", nil
	case a.GetAPIGroup() == "" && res == "nodes":
		if verb == "create" || a.GetName() == node {
			if slices.Contains([]string{"create", "update", "patch"}, verb) {
				return authorizer.DecisionAllow, "", nil
			}
		}
		return authorizer.DecisionDeny, fmt.Sprintf("node %q may only modify its own Node object", node), nil
	case a.GetAPIGroup() == "coordination.k8s.io" && res == "leases":
		if a.GetNamespace() == "kube-node-lease" && (verb == "create" || a.GetName() == node) {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionDeny, fmt.Sprintf("node %q may only modify its own Lease in kube-node-lease", node), nil
	case a.GetAPIGroup() == "" && res == "pods" && (sub == "status" || (sub == "" && verb == "delete")):
		if z.PodNode == nil {
			return authorizer.DecisionNoOpinion, "", nil
		}
		bound, err := z.PodNode(ctx, a.GetNamespace(), a.GetName())
		if apierrors.IsNotFound(err) && verb == "delete" {
			// A node finishing a pod that is already gone (kubectl run
			// --rm deleted it first) gets the honest 404, not a 403: it
			// may read every pod anyway, so nothing is revealed.
			return authorizer.DecisionAllow, "", nil
		}
		if err != nil {
			return authorizer.DecisionNoOpinion, "", nil
		}
		if bound == node {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionDeny, fmt.Sprintf("no relationship found between node %q and this pod", node), nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

var _ authorizer.Authorizer = (*Authorizer)(nil)

// ConditionsAwareAuthorize implements authorizer.Authorizer: svcnet's
// decisions never carry conditions.
func (z *Authorizer) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(z.Authorize(ctx, a))
}

// EvaluateConditions implements authorizer.Authorizer.
func (z *Authorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// nodeOf names the node a node agent's user is.
func nodeOf(u user.Info) (string, bool) {
	node, ok := strings.CutPrefix(u.GetName(), NodeUserPrefix)
	return node, ok && slices.Contains(u.GetGroups(), NodeGroup)
}

// RulesFor implements review.RuleResolver: the rules of a user's RBAC
// bindings; system:masters may do anything; what the Node authorizer
// grants is not listed (the answer is then incomplete).
func (z *Authorizer) RulesFor(ctx context.Context, u user.Info, namespace string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, bool, error) {
	if slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return []authorizationv1.ResourceRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
			[]authorizationv1.NonResourceRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}, false, nil
	}
	incomplete := slices.Contains(u.GetGroups(), NodeGroup)
	if z.RBAC == nil || (z.rbacSynced != nil && !z.rbacSynced(ctx)) {
		return nil, nil, true, nil
	}
	rules, errs := z.RBAC.RulesFor(u, namespace)
	var res []authorizationv1.ResourceRule
	var nonRes []authorizationv1.NonResourceRule
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			nonRes = append(nonRes, authorizationv1.NonResourceRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
			continue
		}
		res = append(res, authorizationv1.ResourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
	}
	return res, nonRes, incomplete || len(errs) > 0, errors.Join(errs...)
}
