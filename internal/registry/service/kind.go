// Package service is the registry of core/v1 Services: validation, the
// allocation of cluster IPs and node ports, and `kubectl get` columns.
package service

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"

	"github.com/svcnet/svcnet/internal/registry"
)

// Kind describes core/v1 Services.
var Kind = &registry.Kind{
	Resource:   schema.GroupResource{Resource: "services"},
	Singular:   "service",
	Version:    "v1",
	Namespaced: true,
	New:        func() runtime.Object { return &corev1.Service{} },
	NewList:    func() runtime.Object { return &corev1.ServiceList{} },
	ShortNames: []string{"svc"},
	Categories: []string{"all"},
	Status:     true,
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		return Validate(obj.(*corev1.Service))
	},
	ValidateUpdate: func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		return ValidateUpdate(obj.(*corev1.Service), old.(*corev1.Service))
	},
	Fields: func(obj runtime.Object) fields.Set {
		svc := obj.(*corev1.Service)
		return fields.Set{"spec.clusterIP": svc.Spec.ClusterIP, "spec.type": string(svc.Spec.Type)}
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Type", Description: "The type of the service."},
			{Name: "Cluster-IP", Description: "The cluster IP of the service."},
			{Name: "External-IP", Description: "The external IP addresses of the service."},
			{Name: "Port(s)", Description: "The ports of the service."},
			registry.AgeColumn,
			{Name: "Selector", Wide: true, Description: "The label selector of the service's pods."},
		},
		Row: func(obj runtime.Object) []any {
			svc := obj.(*corev1.Service)
			return []any{string(svc.Spec.Type), clusterIPColumn(svc), externalIPColumn(svc), portsColumn(svc),
				registry.CreationAge(svc), selectorColumn(svc.Spec.Selector)}
		},
	},
}

// NewREST returns the Services endpoint with allocation wired in, and
// its status endpoint.
func NewREST(optsGetter generic.RESTOptionsGetter, alloc *Allocators) (*REST, *registry.StatusREST, error) {
	// Every delete that commits frees what the Service held, whichever
	// path it takes (a delete, a collection's, the update that removes
	// the last finalizer). The storage is wrapped as the store makes it,
	// before the store's own goroutines (the object count) read it.
	store, err := registry.NewStore(Kind, releasing(optsGetter, alloc))
	if err != nil {
		return nil, nil, err
	}
	strategy := registry.NewStrategy(Kind)
	// The status endpoint is a copy made before the allocation hooks go
	// in: a status write changes no allocation (kube-apiserver's too).
	status := registry.NewStatusREST(Kind, store)
	alloc.List = func(ctx context.Context) ([]corev1.Service, error) {
		ctx = genericapirequest.WithNamespace(ctx, metav1.NamespaceAll)
		obj, err := store.List(ctx, &metainternalversion.ListOptions{})
		if err != nil {
			return nil, err
		}
		return obj.(*corev1.ServiceList).Items, nil
	}
	store.BeginCreate = func(ctx context.Context, obj runtime.Object, options *metav1.CreateOptions) (genericregistry.FinishFunc, error) {
		svc := obj.(*corev1.Service)
		w := writeOf(ctx)
		w.begin()
		// Report invalid input before touching the allocators.
		if errs := strategy.Validate(ctx, svc); len(errs) > 0 {
			return nil, invalidErr(svc, errs)
		}
		dryRun := len(options.DryRun) > 0
		t, err := alloc.allocate(ctx, svc, nil, dryRun)
		if err != nil {
			return nil, err
		}
		return func(_ context.Context, success bool) { w.finish(t, success, dryRun, nil) }, nil
	}
	store.BeginUpdate = func(ctx context.Context, obj, oldObj runtime.Object, options *metav1.UpdateOptions) (genericregistry.FinishFunc, error) {
		svc, old := obj.(*corev1.Service), oldObj.(*corev1.Service)
		w := writeOf(ctx)
		w.begin()
		keepAllocated(svc, old)
		if errs := strategy.ValidateUpdate(ctx, svc, old); len(errs) > 0 {
			return nil, invalidErr(svc, errs)
		}
		dryRun := len(options.DryRun) > 0
		t, err := alloc.allocate(ctx, svc, old, dryRun)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, success bool) {
			given := released(svc, old) // svc as it is written
			w.finish(t, success, dryRun, func() { alloc.releaseValues(ctx, old, given) })
		}, nil
	}
	return &REST{REST: registry.NewREST(Kind, store)}, status, nil
}

func invalidErr(svc *corev1.Service, errs field.ErrorList) error {
	return apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, svc.Name, errs)
}

func clusterIPColumn(svc *corev1.Service) string {
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return "<none>"
	case len(svc.Spec.ClusterIPs) > 0:
		return strings.Join(svc.Spec.ClusterIPs, ",")
	case svc.Spec.ClusterIP != "":
		return svc.Spec.ClusterIP
	}
	return "<none>"
}

func externalIPColumn(svc *corev1.Service) string {
	var lbIPs []string
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP != "" {
			lbIPs = append(lbIPs, ing.IP)
		} else if ing.Hostname != "" {
			lbIPs = append(lbIPs, ing.Hostname)
		}
	}
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(svc.Spec.ExternalIPs) > 0 {
			return strings.Join(svc.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		all := append(lbIPs, svc.Spec.ExternalIPs...)
		if len(all) > 0 {
			return strings.Join(all, ",")
		}
		return "<pending>"
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

func portsColumn(svc *corev1.Service) string {
	if len(svc.Spec.Ports) == 0 {
		return "<none>"
	}
	out := make([]string, 0, len(svc.Spec.Ports))
	for _, p := range svc.Spec.Ports {
		if p.NodePort > 0 {
			out = append(out, fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol))
		} else {
			out = append(out, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
		}
	}
	return strings.Join(out, ",")
}

func selectorColumn(sel map[string]string) string {
	if len(sel) == 0 {
		return "<none>"
	}
	return labels.SelectorFromSet(sel).String()
}
