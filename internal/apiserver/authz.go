package apiserver

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

var (
	readVerbs = []string{"get", "list", "watch"}
	// publicPaths are readable without credentials, like kube-apiserver's
	// system:public-info-viewer role.
	publicPaths = []string{"/healthz", "/livez", "/readyz", "/version"}
)

// PodNodeFunc returns the node a pod is bound to.
type PodNodeFunc func(ctx context.Context, namespace, name string) (string, error)

// Authorizer decides by identity: a fixed set of rules per role, the way
// kube-apiserver's default RBAC roles and its Node authorizer do, without
// the RBAC objects.
type Authorizer struct {
	// PodNode looks up where a pod runs, for the node rules.
	PodNode PodNodeFunc
}

// rule allows verbs on resources ("*" for any; "pods/status" for a
// subresource) in API groups ("*" for any).
type rule struct {
	groups, resources, verbs []string
}

func (r rule) allows(a authorizer.Attributes) bool {
	res := a.GetResource()
	if a.GetSubresource() != "" {
		res += "/" + a.GetSubresource()
	}
	return match(r.groups, a.GetAPIGroup()) && match(r.resources, res) && match(r.verbs, a.GetVerb())
}

func match(list []string, v string) bool {
	return slices.Contains(list, "*") || slices.Contains(list, v)
}

var (
	readAll       = rule{[]string{"*"}, []string{"*"}, readVerbs}
	writeEvents   = rule{[]string{"", "events.k8s.io"}, []string{"events"}, []string{"create", "update", "patch"}}
	leaderLeases  = rule{[]string{"coordination.k8s.io"}, []string{"leases"}, []string{"get", "list", "watch", "create", "update", "patch"}}
	serviceReader = rule{[]string{"", "discovery.k8s.io"}, []string{"services", "endpoints", "endpointslices", "nodes"}, readVerbs}
)

// roles by user name.
var userRules = map[string][]rule{
	ControllerManagerUser: {{[]string{"*"}, []string{"*"}, []string{"*"}}},
	SchedulerUser: {
		readAll, writeEvents, leaderLeases,
		{[]string{""}, []string{"pods/binding", "bindings"}, []string{"create"}},
		{[]string{""}, []string{"pods/status"}, []string{"update", "patch"}},
	},
	ProxyUser: {serviceReader, writeEvents},
	DNSUser: {
		serviceReader,
		// configmaps: kube-system/kube-dns's stubDomains and
		// upstreamNameservers, as kube-dns reads them.
		{[]string{""}, []string{"pods", "namespaces", "configmaps"}, readVerbs},
	},
	IngressUser: {
		serviceReader, writeEvents, leaderLeases,
		{[]string{"networking.k8s.io"}, []string{"ingresses", "ingressclasses"}, readVerbs},
		{[]string{"networking.k8s.io"}, []string{"ingresses/status"}, []string{"update", "patch"}},
		{[]string{""}, []string{"secrets", "configmaps", "pods"}, readVerbs},
	},
}

// roles by group.
var groupRules = map[string][]rule{
	ProxyGroup: {serviceReader, writeEvents},
}

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
	if !a.IsResourceRequest() {
		return z.nonResource(u, a)
	}
	if slices.Contains(groups, ViewerGroup) {
		if slices.Contains(readVerbs, a.GetVerb()) && a.GetResource() != "secrets" {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionDeny, "the viewer role may only read, and not Secrets", nil
	}
	for _, r := range userRules[u.GetName()] {
		if r.allows(a) {
			return authorizer.DecisionAllow, "", nil
		}
	}
	for _, g := range groups {
		for _, r := range groupRules[g] {
			if r.allows(a) {
				return authorizer.DecisionAllow, "", nil
			}
		}
	}
	if node, ok := strings.CutPrefix(u.GetName(), NodeUserPrefix); ok && slices.Contains(groups, NodeGroup) {
		return z.authorizeNode(ctx, node, a)
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func (z *Authorizer) nonResource(u user.Info, a authorizer.Attributes) (authorizer.Decision, string, error) {
	path := a.GetPath()
	if a.GetVerb() != "get" {
		return authorizer.DecisionNoOpinion, "", nil
	}
	for _, p := range publicPaths {
		if path == p || strings.HasPrefix(path, p+"/") {
			return authorizer.DecisionAllow, "", nil
		}
	}
	if u.GetName() == user.Anonymous {
		return authorizer.DecisionNoOpinion, "", nil
	}
	// Discovery and OpenAPI are readable by every authenticated user.
	for _, p := range []string{"/api", "/apis", "/openapi"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return authorizer.DecisionAllow, "", nil
		}
	}
	if path == "/metrics" && (slices.Contains(u.GetGroups(), ViewerGroup) || u.GetName() == ControllerManagerUser) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
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
	case writeEvents.allows(a):
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
