// Package rbac decides requests by Kubernetes' RBAC objects: which Roles
// and ClusterRoles a user is bound to, and whether one of their rules
// allows the request. It is pure: the objects come through a Lister, so
// that the same decisions are made over informers in the API server and
// over plain slices in tests.
package rbac

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// RuleAllows reports whether one rule allows a request.
func RuleAllows(r *rbacv1.PolicyRule, a authorizer.Attributes) bool {
	if !has(r.Verbs, rbacv1.VerbAll, a.GetVerb()) {
		return false
	}
	if !a.IsResourceRequest() {
		return nonResourceURLMatches(r.NonResourceURLs, a.GetPath())
	}
	if !has(r.APIGroups, rbacv1.APIGroupAll, a.GetAPIGroup()) {
		return false
	}
	combined := a.GetResource()
	if a.GetSubresource() != "" {
		combined += "/" + a.GetSubresource()
	}
	if !resourceMatches(r.Resources, combined, a.GetSubresource()) {
		return false
	}
	// A rule naming objects allows only requests for those names; a
	// request without a name (list, create) is not one of them.
	return len(r.ResourceNames) == 0 || (a.GetName() != "" && slices.Contains(r.ResourceNames, a.GetName()))
}

func has(list []string, all, v string) bool {
	for _, x := range list {
		if x == all || x == v {
			return true
		}
	}
	return false
}

// resourceMatches: "*" is every resource and subresource, "pods/log" one
// subresource of one resource, "*/scale" one subresource of every
// resource.
func resourceMatches(rules []string, combined, sub string) bool {
	for _, r := range rules {
		switch {
		case r == rbacv1.ResourceAll, r == combined:
			return true
		case sub != "" && strings.HasPrefix(r, "*/") && r[2:] == sub:
			return true
		}
	}
	return false
}

// nonResourceURLMatches: a URL ending in "*" matches every path it
// prefixes; "*" alone matches all.
func nonResourceURLMatches(urls []string, path string) bool {
	for _, u := range urls {
		switch {
		case u == rbacv1.NonResourceAll, u == path:
			return true
		case strings.HasSuffix(u, "*") && strings.HasPrefix(path, u[:len(u)-1]):
			return true
		}
	}
	return false
}

// AppliesTo reports whether a binding's subject is the user. A
// ServiceAccount subject without a namespace is in the binding's own.
func AppliesTo(s *rbacv1.Subject, u user.Info, bindingNamespace string) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return u.GetName() == s.Name
	case rbacv1.GroupKind:
		return slices.Contains(u.GetGroups(), s.Name)
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return ns != "" && u.GetName() == serviceaccount.MakeUsername(ns, s.Name)
	}
	return false
}
