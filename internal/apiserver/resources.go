package apiserver

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/svcnet/svcnet/internal/apis"
	"github.com/svcnet/svcnet/internal/pki"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/apps"
	"github.com/svcnet/svcnet/internal/registry/batch"
	"github.com/svcnet/svcnet/internal/registry/coordination"
	"github.com/svcnet/svcnet/internal/registry/core"
	"github.com/svcnet/svcnet/internal/registry/discovery"
	"github.com/svcnet/svcnet/internal/registry/metrics"
	"github.com/svcnet/svcnet/internal/registry/networking"
	"github.com/svcnet/svcnet/internal/registry/rbac"
	"github.com/svcnet/svcnet/internal/registry/review"
	"github.com/svcnet/svcnet/internal/registry/service"
	"github.com/svcnet/svcnet/internal/satoken"
)

// plainKinds are the served kinds whose endpoints need nothing beyond
// their Kind description (and a status subresource when they have one).
var plainKinds = []*registry.Kind{
	core.Node, core.Endpoints, core.Secret, core.ConfigMap, core.ServiceAccount, core.Event,
	discovery.EndpointSlice,
	networking.Ingress, networking.IngressClass, networking.ServiceCIDR, networking.IPAddress,
	coordination.Lease,
	rbac.Role, rbac.ClusterRole, rbac.RoleBinding, rbac.ClusterRoleBinding,
}

// resources builds every served endpoint, keyed by group then by
// resource path ("pods", "pods/status" …).
type resources struct {
	byGroup map[string]map[string]rest.Storage
	// podNode finds the node of a pod, for the node authorizer.
	podNode PodNodeFunc
	// record is where Services' allocations are kept.
	record *allocRecord
}

// closeRecord releases the allocation record's etcd client.
func (r *resources) closeRecord() {
	if r.record != nil && r.record.destroy != nil {
		r.record.destroy()
	}
}

// reviewers answer the review kinds.
type reviewers struct {
	authz     *Authorizer
	tokens    authenticator.Token
	audiences authenticator.Audiences
}

func buildResources(optsGetter generic.RESTOptionsGetter, alloc *service.Allocators, nodeOpts NodeOptions, ca *pki.CA, rv reviewers, signer *satoken.Signer, eventTTL time.Duration) (*resources, error) {
	r := &resources{byGroup: map[string]map[string]rest.Storage{}}
	add := func(k *registry.Kind, sub string, s rest.Storage) {
		g := k.Resource.Group
		if r.byGroup[g] == nil {
			r.byGroup[g] = map[string]rest.Storage{}
		}
		path := k.Resource.Resource
		if sub != "" {
			path += "/" + sub
		}
		r.byGroup[g][path] = s
	}
	var nodes core.NodeConnection
	var nodeStore metrics.Store
	for _, k := range plainKinds {
		if k == core.Event {
			events := *k
			events.TTLSeconds = uint64(eventTTL / time.Second)
			k = &events
		}
		store, err := registry.NewStore(k, optsGetter)
		if err != nil {
			return nil, err
		}
		if k == networking.IPAddress {
			// Cluster IPs are recorded as IPAddresses, node ports beside
			// them: every API server of the cluster allocates from there.
			if r.record, err = newAllocRecord(optsGetter, store, alloc.Ports.String()); err != nil {
				return nil, err
			}
			alloc.Record = r.record
		}
		add(k, "", registry.NewREST(k, store))
		if k.Status {
			add(k, "status", registry.NewStatusREST(k, store))
		}
		if k == core.Node {
			nodeStore = store
		}
		if k == core.Node && nodeOpts.Enabled {
			conn, err := newNodeConn(store, nodeOpts, ca)
			if err != nil {
				return nil, err
			}
			nodes = conn
		}
	}

	pods, err := registry.NewStore(core.Pod, optsGetter)
	if err != nil {
		return nil, err
	}
	add(core.Pod, "", registry.NewREST(core.Pod, pods))
	add(core.Pod, "status", registry.NewStatusREST(core.Pod, pods))
	add(core.Pod, "binding", &core.BindingREST{Store: pods})
	onNode := core.PodNode{Pods: pods, Nodes: nodes}
	add(core.Pod, "log", &core.LogREST{PodNode: onNode})
	add(core.Pod, "exec", &core.ExecREST{PodNode: onNode})
	add(core.Pod, "attach", &core.AttachREST{PodNode: onNode})
	add(core.Pod, "portforward", &core.PortForwardREST{PodNode: onNode})
	add(core.Pod, "proxy", &core.PodProxyREST{PodNode: onNode})
	if nodes != nil {
		// metrics.k8s.io, from the node agents (what metrics-server adds
		// to a cluster).
		sums := metrics.Summaries{Nodes: nodes}
		r.byGroup[metricsv1beta1.GroupName] = map[string]rest.Storage{
			"nodes": metrics.NewNodeMetrics(nodeStore, sums),
			"pods":  metrics.NewPodMetrics(pods, sums),
		}
	}
	r.podNode = func(ctx context.Context, ns, name string) (string, error) {
		obj, err := pods.Get(request.WithNamespace(ctx, ns), name, &metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return obj.(*corev1.Pod).Spec.NodeName, nil
	}

	nss, err := registry.NewStore(core.Namespace, optsGetter)
	if err != nil {
		return nil, err
	}
	add(core.Namespace, "", &core.NamespaceREST{REST: registry.NewREST(core.Namespace, nss)})
	add(core.Namespace, "status", registry.NewStatusREST(core.Namespace, nss))
	add(core.Namespace, "finalize", &core.FinalizeREST{Store: nss})

	svcs, svcStatus, err := service.NewREST(optsGetter, alloc)
	if err != nil {
		return nil, err
	}
	add(service.Kind, "", svcs)
	add(service.Kind, "status", svcStatus)
	slices := r.byGroup["discovery.k8s.io"]["endpointslices"].(rest.Lister)
	add(service.Kind, "proxy", &core.ServiceProxyREST{
		Nodes: nodes,
		Service: func(ctx context.Context, name string) (*corev1.Service, error) {
			obj, err := svcs.Get(ctx, name, &metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return obj.(*corev1.Service), nil
		},
		Slices: func(ctx context.Context, name string) ([]discoveryv1.EndpointSlice, error) {
			sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})
			obj, err := slices.List(ctx, &metainternalversion.ListOptions{LabelSelector: sel, ResourceVersion: "0"})
			if err != nil {
				return nil, err
			}
			return obj.(*discoveryv1.EndpointSliceList).Items, nil
		},
	})

	for _, k := range []*registry.Kind{apps.Deployment, apps.ReplicaSet, apps.StatefulSet, apps.DaemonSet, core.ReplicationController} {
		store, err := registry.NewStore(k, optsGetter)
		if err != nil {
			return nil, err
		}
		add(k, "", registry.NewREST(k, store))
		add(k, "status", registry.NewStatusREST(k, store))
		if k != apps.DaemonSet {
			add(k, "scale", &apps.ScaleREST{Store: store})
		}
	}

	jobs, err := registry.NewStore(batch.Job, optsGetter)
	if err != nil {
		return nil, err
	}
	add(batch.Job, "", registry.NewREST(batch.Job, jobs))
	add(batch.Job, "status", registry.NewStatusREST(batch.Job, jobs))

	r.byGroup[""]["serviceaccounts/token"] = &core.TokenREST{
		Signer: signer, Audiences: rv.audiences,
		ServiceAccounts: r.getter("", "serviceaccounts"), Pods: r.getter("", "pods"),
		Secrets: r.getter("", "secrets"), Nodes: r.getter("", "nodes"),
		NodeOf: nodeOf,
	}

	r.byGroup["authorization.k8s.io"] = map[string]rest.Storage{
		"selfsubjectaccessreviews":  review.NewSelfSubjectAccessReview(rv.authz),
		"selfsubjectrulesreviews":   review.NewSelfSubjectRulesReview(rv.authz),
		"subjectaccessreviews":      review.NewSubjectAccessReview(rv.authz),
		"localsubjectaccessreviews": review.NewLocalSubjectAccessReview(rv.authz),
	}
	r.byGroup["authentication.k8s.io"] = map[string]rest.Storage{
		"selfsubjectreviews": review.NewSelfSubjectReview(),
		"tokenreviews":       review.NewTokenReview(rv.tokens, rv.audiences),
	}
	return r, nil
}

// getter reads objects of a served resource from its watch cache.
func (r *resources) getter(group, resource string) core.Getter {
	g := r.byGroup[group][resource].(rest.Getter)
	return func(ctx context.Context, ns, name string) (runtime.Object, error) {
		return g.Get(request.WithNamespace(ctx, ns), name, &metav1.GetOptions{ResourceVersion: "0"})
	}
}

// served lists the served resources by group, for the default policy.
func (r *resources) served() served {
	out := served{}
	for g, m := range r.byGroup {
		for path := range m {
			out[g] = append(out[g], path)
		}
	}
	return out
}

// install serves the resources on s: the core group under /api, the
// others under /apis.
func (r *resources) install(s *genericapiserver.GenericAPIServer) error {
	legacy := genericapiserver.NewDefaultAPIGroupInfo("", apis.Scheme, apis.ParameterCodec, apis.Codecs)
	legacy.VersionedResourcesStorageMap["v1"] = r.byGroup[""]
	if err := s.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, &legacy); err != nil {
		return fmt.Errorf("install core API: %w", err)
	}
	var groups []*genericapiserver.APIGroupInfo
	for _, g := range []string{"apps", "batch", "coordination.k8s.io", "discovery.k8s.io", "networking.k8s.io",
		"rbac.authorization.k8s.io", "authentication.k8s.io", "authorization.k8s.io"} {
		info := genericapiserver.NewDefaultAPIGroupInfo(g, apis.Scheme, apis.ParameterCodec, apis.Codecs)
		info.VersionedResourcesStorageMap["v1"] = r.byGroup[g]
		groups = append(groups, &info)
	}
	if m := r.byGroup[metricsv1beta1.GroupName]; m != nil {
		info := genericapiserver.NewDefaultAPIGroupInfo(metricsv1beta1.GroupName, apis.Scheme, apis.ParameterCodec, apis.Codecs)
		info.VersionedResourcesStorageMap["v1beta1"] = m
		groups = append(groups, &info)
	}
	if err := s.InstallAPIGroups(groups...); err != nil {
		return fmt.Errorf("install API groups: %w", err)
	}
	return nil
}
