package rbac

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Covers reports whether the owner's rules allow everything the servant's
// rules do, and which parts of the servant's rules they do not: a user may
// only grant, through a Role or a binding, what they hold themselves.
// Wildcards are taken literally: to grant "*" one must hold "*".
func Covers(owner, servant []rbacv1.PolicyRule) (bool, []rbacv1.PolicyRule) {
	var missing []rbacv1.PolicyRule
	for _, s := range servant {
		for _, atom := range atoms(s) {
			if !slices.ContainsFunc(owner, func(o rbacv1.PolicyRule) bool { return ruleCovers(&o, &atom) }) {
				missing = append(missing, atom)
			}
		}
	}
	return len(missing) == 0, missing
}

// atoms splits a rule into rules of one verb and one group, resource,
// object name or non-resource URL each.
func atoms(r rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, verb := range r.Verbs {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if len(r.ResourceNames) == 0 {
					out = append(out, rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{g}, Resources: []string{res}})
				}
				for _, n := range r.ResourceNames {
					out = append(out, rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{g}, Resources: []string{res}, ResourceNames: []string{n}})
				}
			}
		}
		for _, u := range r.NonResourceURLs {
			out = append(out, rbacv1.PolicyRule{Verbs: []string{verb}, NonResourceURLs: []string{u}})
		}
	}
	return out
}

// ruleCovers decides for one atom of a servant rule.
func ruleCovers(o, atom *rbacv1.PolicyRule) bool {
	if !has(o.Verbs, rbacv1.VerbAll, atom.Verbs[0]) {
		return false
	}
	if len(atom.NonResourceURLs) > 0 {
		u := atom.NonResourceURLs[0]
		return slices.ContainsFunc(o.NonResourceURLs, func(ou string) bool {
			return ou == rbacv1.NonResourceAll || ou == u ||
				(strings.HasSuffix(ou, "*") && strings.HasPrefix(u, ou[:len(ou)-1]))
		})
	}
	if !has(o.APIGroups, rbacv1.APIGroupAll, atom.APIGroups[0]) {
		return false
	}
	res := atom.Resources[0]
	if !has(o.Resources, rbacv1.ResourceAll, res) {
		_, sub, ok := strings.Cut(res, "/")
		if !ok || !slices.Contains(o.Resources, "*/"+sub) {
			return false
		}
	}
	if len(o.ResourceNames) == 0 {
		return true
	}
	return len(atom.ResourceNames) == 1 && slices.Contains(o.ResourceNames, atom.ResourceNames[0])
}
