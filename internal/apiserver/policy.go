package apiserver

import (
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/svcnet/svcnet/internal/rbac"
)

// The default RBAC policy: Kubernetes' own default roles and bindings
// (cluster-admin, admin, edit, view, system:discovery, system:basic-user,
// system:public-info-viewer …) and one ClusterRole and binding per svcnet
// component identity. The API server writes them at every start (adding
// back what is missing, unless a role is annotated autoupdate=false), as
// kube-apiserver's rbac/bootstrap-roles hook does.

const (
	// bootstrapLabel marks the default objects, as in Kubernetes.
	bootstrapLabel = "kubernetes.io/bootstrapping"
	bootstrapValue = "rbac-defaults"
	// The labels by which admin, edit and view gather their rules.
	aggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	aggregateToEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	aggregateToView  = "rbac.authorization.k8s.io/aggregate-to-view"
	// ViewerRole is the ClusterRole of svcnet's viewer identity.
	ViewerRole = "svcnet:viewer"
)

var (
	readVerbs  = []string{"get", "list", "watch"}
	writeVerbs = []string{"create", "delete", "deletecollection", "patch", "update"}
	// publicPaths are readable without credentials
	// (system:public-info-viewer).
	publicPaths = []string{"/healthz", "/livez", "/readyz", "/version"}
)

func rule(verbs []string, group string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: []string{group}, Resources: resources}
}

func urls(verbs []string, paths ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, NonResourceURLs: paths}
}

func clusterRole(name string, labels map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	l := map[string]string{bootstrapLabel: bootstrapValue}
	for k, v := range labels {
		l[k] = v
	}
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, Annotations: map[string]string{rbac.AutoUpdate: "true"}},
		Rules:      rules,
	}
}

func aggregated(name string, labels map[string]string, from ...string) *rbacv1.ClusterRole {
	r := clusterRole(name, labels)
	r.AggregationRule = &rbacv1.AggregationRule{}
	for _, l := range from {
		r.AggregationRule.ClusterRoleSelectors = append(r.AggregationRule.ClusterRoleSelectors,
			metav1.LabelSelector{MatchLabels: map[string]string{l: "true"}})
	}
	return r
}

func binding(name, role string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{bootstrapLabel: bootstrapValue},
			Annotations: map[string]string{rbac.AutoUpdate: "true"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: subjects,
	}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func groupSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

// served lists the resources the server serves, by group, for the
// viewer's role.
type served map[string][]string

// defaultClusterRoles is the default policy's roles. res are the served
// resources (group → "pods", "pods/status" …).
func defaultClusterRoles(res served) []*rbacv1.ClusterRole {
	serviceReader := rule(readVerbs, "", "services", "endpoints", "nodes")
	sliceReader := rule(readVerbs, "discovery.k8s.io", "endpointslices")
	events := rbacv1.PolicyRule{Verbs: []string{"create", "update", "patch"}, APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}}
	leases := rule([]string{"get", "list", "watch", "create", "update", "patch"}, "coordination.k8s.io", "leases")
	selfReviews := []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}

	return []*rbacv1.ClusterRole{
		clusterRole("cluster-admin", nil,
			rule([]string{"*"}, "*", "*"),
			urls([]string{"*"}, "*")),
		clusterRole("system:discovery", nil,
			urls([]string{"get"}, "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/")),
		clusterRole("system:public-info-viewer", nil,
			urls([]string{"get"}, "/healthz", "/livez", "/readyz", "/version", "/version/")),
		clusterRole("system:basic-user", nil,
			rule([]string{"create"}, "authorization.k8s.io", selfReviews...),
			rule([]string{"create"}, "authentication.k8s.io", "selfsubjectreviews")),

		// admin, edit and view gather the rules of the roles labelled to
		// aggregate into them (CRDs' roles can add themselves).
		aggregated("admin", nil, aggregateToAdmin),
		aggregated("edit", map[string]string{aggregateToAdmin: "true"}, aggregateToEdit),
		aggregated("view", map[string]string{aggregateToEdit: "true"}, aggregateToView),
		clusterRole("system:aggregate-to-admin", map[string]string{aggregateToAdmin: "true"},
			rule(append(readVerbs, writeVerbs...), rbacv1.GroupName, "roles", "rolebindings"),
			rule([]string{"create"}, "authorization.k8s.io", "localsubjectaccessreviews")),
		clusterRole("system:aggregate-to-edit", map[string]string{aggregateToEdit: "true"},
			rule(writeVerbs, "", "pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy",
				"configmaps", "endpoints", "persistentvolumeclaims", "replicationcontrollers", "replicationcontrollers/scale",
				"secrets", "serviceaccounts", "services", "services/proxy"),
			rule(readVerbs, "", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"),
			rule([]string{"create"}, "", "pods/eviction", "serviceaccounts/token"),
			rule([]string{"impersonate"}, "", "serviceaccounts"),
			rule(writeVerbs, "apps", "daemonsets", "deployments", "deployments/rollback", "deployments/scale",
				"replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale"),
			rule(writeVerbs, "autoscaling", "horizontalpodautoscalers"),
			rule(writeVerbs, "batch", "cronjobs", "jobs"),
			rule(writeVerbs, "networking.k8s.io", "ingresses", "networkpolicies"),
			rule(writeVerbs, "policy", "poddisruptionbudgets"),
			rule(writeVerbs, "coordination.k8s.io", "leases")),
		clusterRole("system:aggregate-to-view", map[string]string{aggregateToView: "true"},
			rule(readVerbs, "", "pods", "pods/log", "pods/status", "configmaps", "endpoints", "persistentvolumeclaims",
				"persistentvolumeclaims/status", "replicationcontrollers", "replicationcontrollers/scale",
				"replicationcontrollers/status", "serviceaccounts", "services", "services/status",
				"bindings", "events", "limitranges", "namespaces", "namespaces/status", "resourcequotas", "resourcequotas/status"),
			rule(readVerbs, "apps", "controllerrevisions", "daemonsets", "daemonsets/status", "deployments", "deployments/scale",
				"deployments/status", "replicasets", "replicasets/scale", "replicasets/status",
				"statefulsets", "statefulsets/scale", "statefulsets/status"),
			rule(readVerbs, "autoscaling", "horizontalpodautoscalers", "horizontalpodautoscalers/status"),
			rule(readVerbs, "batch", "cronjobs", "cronjobs/status", "jobs", "jobs/status"),
			rule(readVerbs, "discovery.k8s.io", "endpointslices"),
			rule(readVerbs, "networking.k8s.io", "ingresses", "ingresses/status", "networkpolicies"),
			rule(readVerbs, "policy", "poddisruptionbudgets", "poddisruptionbudgets/status"),
			rule(readVerbs, "events.k8s.io", "events"),
			rule(readVerbs, "coordination.k8s.io", "leases")),

		// As metrics-server's manifest adds it: who may view may read the
		// resource metrics (kubectl top).
		clusterRole("system:aggregated-metrics-reader", map[string]string{aggregateToView: "true", aggregateToEdit: "true", aggregateToAdmin: "true"},
			rule([]string{"get", "list", "watch"}, "metrics.k8s.io", "pods", "nodes")),

		// svcnet's components.
		clusterRole(ControllerManagerUser, nil, rule([]string{"*"}, "*", "*")),
		clusterRole(SchedulerUser, nil,
			rule(readVerbs, "*", "*"), events, leases,
			rule([]string{"create"}, "", "pods/binding", "bindings"),
			rule([]string{"update", "patch"}, "", "pods/status")),
		// kube-proxy reads the service ranges from ServiceCIDRs.
		clusterRole("system:node-proxier", nil, serviceReader, sliceReader, events,
			rule([]string{"list", "watch"}, "networking.k8s.io", "servicecidrs")),
		// svcnet's proxy and ingress keep a Lease of what their data path
		// reflects (see internal/programmed; an ingress replica deletes
		// its own as it stops); kube-proxy's role has no Leases.
		clusterRole(ProgrammedLeaseRole, nil, rule([]string{"get", "create", "update", "delete"}, "coordination.k8s.io", "leases")),
		clusterRole(DNSUser, nil, serviceReader, sliceReader,
			// configmaps: kube-system/kube-dns's stubDomains and
			// upstreamNameservers, as kube-dns reads them.
			rule(readVerbs, "", "pods", "namespaces", "configmaps")),
		clusterRole(IngressUser, nil, serviceReader, sliceReader, events, leases,
			rule(readVerbs, "networking.k8s.io", "ingresses", "ingressclasses"),
			rule([]string{"update", "patch"}, "networking.k8s.io", "ingresses/status"),
			rule(readVerbs, "", "secrets", "configmaps", "pods")),
		viewerRole(res),
	}
}

// viewerRole reads every served resource but Secrets, and the metrics.
func viewerRole(res served) *rbacv1.ClusterRole {
	groups := make([]string, 0, len(res))
	for g := range res {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	r := clusterRole(ViewerRole, nil)
	for _, g := range groups {
		var list []string
		for _, name := range res[g] {
			if name == "secrets" || strings.HasSuffix(name, "reviews") || strings.HasSuffix(name, "/token") {
				continue
			}
			list = append(list, name)
		}
		slices.Sort(list)
		if len(list) > 0 {
			r.Rules = append(r.Rules, rule(readVerbs, g, list...))
		}
	}
	r.Rules = append(r.Rules, urls([]string{"get"}, "/metrics"))
	return r
}

// defaultClusterRoleBindings binds the default roles.
func defaultClusterRoleBindings() []*rbacv1.ClusterRoleBinding {
	return []*rbacv1.ClusterRoleBinding{
		binding("cluster-admin", "cluster-admin", groupSubject(user.SystemPrivilegedGroup)),
		binding("system:discovery", "system:discovery", groupSubject(user.AllAuthenticated)),
		binding("system:basic-user", "system:basic-user", groupSubject(user.AllAuthenticated)),
		binding("system:public-info-viewer", "system:public-info-viewer",
			groupSubject(user.AllAuthenticated), groupSubject(user.AllUnauthenticated)),
		binding(ControllerManagerUser, ControllerManagerUser, userSubject(ControllerManagerUser)),
		binding(SchedulerUser, SchedulerUser, userSubject(SchedulerUser)),
		binding("system:node-proxier", "system:node-proxier", userSubject(ProxyUser), groupSubject(ProxyGroup)),
		binding(ProgrammedLeaseRole, ProgrammedLeaseRole, userSubject(ProxyUser), groupSubject(ProxyGroup), userSubject(IngressUser)),
		binding(DNSUser, DNSUser, userSubject(DNSUser)),
		binding(IngressUser, IngressUser, userSubject(IngressUser)),
		binding(ViewerRole, ViewerRole, groupSubject(ViewerGroup)),
	}
}
