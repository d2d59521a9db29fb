package rbac

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AutoUpdate is the annotation that, set to "false", keeps the API server
// from adding its default rules and subjects back to a bootstrap role or
// binding an administrator changed.
const AutoUpdate = "rbac.authorization.kubernetes.io/autoupdate"

// ReconcileClusterRole returns what a bootstrap ClusterRole should become
// given what is stored: the stored one with the default rules, labels and
// annotations it lacks added (nothing is taken away, as kube-apiserver
// does), and whether that differs from what is stored.
func ReconcileClusterRole(stored, want *rbacv1.ClusterRole) (*rbacv1.ClusterRole, bool) {
	if stored == nil {
		return want.DeepCopy(), true
	}
	if stored.Annotations[AutoUpdate] == "false" {
		return stored, false
	}
	out := stored.DeepCopy()
	changed := mergeMeta(&out.ObjectMeta, &want.ObjectMeta)
	if ok, missing := Covers(out.Rules, want.Rules); !ok {
		out.Rules = append(out.Rules, missing...)
		changed = true
	}
	if want.AggregationRule != nil && out.AggregationRule == nil {
		out.AggregationRule = want.AggregationRule.DeepCopy()
		changed = true
	}
	return out, changed
}

// ReconcileClusterRoleBinding is ReconcileClusterRole for bindings: the
// default subjects are added. A binding whose roleRef differs cannot be
// updated (roleRef is immutable): recreate tells the caller to delete it
// first.
func ReconcileClusterRoleBinding(stored, want *rbacv1.ClusterRoleBinding) (out *rbacv1.ClusterRoleBinding, changed, recreate bool) {
	if stored == nil {
		return want.DeepCopy(), true, false
	}
	if stored.Annotations[AutoUpdate] == "false" {
		return stored, false, false
	}
	if stored.RoleRef != want.RoleRef {
		return want.DeepCopy(), true, true
	}
	out = stored.DeepCopy()
	changed = mergeMeta(&out.ObjectMeta, &want.ObjectMeta)
	for _, s := range want.Subjects {
		if !slices.Contains(out.Subjects, s) {
			out.Subjects = append(out.Subjects, s)
			changed = true
		}
	}
	return out, changed, false
}

// mergeMeta adds want's labels and annotations that m lacks.
func mergeMeta(m, want *metav1.ObjectMeta) bool {
	changed := false
	for _, p := range []struct {
		dst *map[string]string
		src map[string]string
	}{{&m.Labels, want.Labels}, {&m.Annotations, want.Annotations}} {
		for k, v := range p.src {
			if _, ok := (*p.dst)[k]; ok {
				continue
			}
			if *p.dst == nil {
				*p.dst = map[string]string{}
			}
			(*p.dst)[k] = v
			changed = true
		}
	}
	return changed
}
