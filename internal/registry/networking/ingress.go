// Package networking is the registry of networking.k8s.io/v1 Ingresses
// and IngressClasses.
package networking

import (
	"context"
	"fmt"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

var pathTypes = sets.New(networkingv1.PathTypeExact, networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific)

// Ingress describes networking.k8s.io/v1 Ingresses.
var Ingress = &registry.Kind{
	Resource:   schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"},
	Singular:   "ingress",
	Version:    "v1",
	Namespaced: true,
	New:        func() runtime.Object { return &networkingv1.Ingress{} },
	NewList:    func() runtime.Object { return &networkingv1.IngressList{} },
	ShortNames: []string{"ing"},
	Status:     true,
	Generation: true,
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		return validateIngress(obj.(*networkingv1.Ingress))
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Class", Description: "The name of the IngressClass resource that should be used for ingress."},
			{Name: "Hosts", Description: "Hosts that incoming requests are matched against before the ingress rule"},
			{Name: "Address", Description: "Address is a list containing ingress points for the load-balancer"},
			{Name: "Ports", Description: "Ports of TLS configurations that open"},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object) []any {
			ing := obj.(*networkingv1.Ingress)
			class := "<none>"
			if ing.Spec.IngressClassName != nil {
				class = *ing.Spec.IngressClassName
			}
			var hosts []string
			for _, r := range ing.Spec.Rules {
				if r.Host != "" {
					hosts = append(hosts, r.Host)
				}
			}
			hostCol := strings.Join(hosts, ",")
			if hostCol == "" {
				hostCol = "*"
			}
			var addrs []string
			for _, lb := range ing.Status.LoadBalancer.Ingress {
				if lb.IP != "" {
					addrs = append(addrs, lb.IP)
				} else if lb.Hostname != "" {
					addrs = append(addrs, lb.Hostname)
				}
			}
			ports := "80"
			if len(ing.Spec.TLS) > 0 {
				ports = "80, 443"
			}
			return []any{class, hostCol, strings.Join(addrs, ","), ports, registry.CreationAge(ing)}
		},
	},
}

func validateIngress(ing *networkingv1.Ingress) field.ErrorList {
	errs := registry.ValidateMeta(ing, true, registry.DNS1123Domain)
	spec := field.NewPath("spec")
	if ing.Spec.DefaultBackend != nil {
		errs = append(errs, validateBackend(ing.Spec.DefaultBackend, spec.Child("defaultBackend"))...)
	}
	if len(ing.Spec.Rules) == 0 && ing.Spec.DefaultBackend == nil {
		errs = append(errs, field.Invalid(spec, ing.Spec, "either `defaultBackend` or `rules` must be specified"))
	}
	if c := ing.Spec.IngressClassName; c != nil {
		errs = append(errs, registry.InvalidEach(spec.Child("ingressClassName"), *c, validation.IsDNS1123Subdomain(*c))...)
	}
	for i, r := range ing.Spec.Rules {
		rp := spec.Child("rules").Index(i)
		if r.Host != "" {
			errs = append(errs, validateHost(r.Host, rp.Child("host"))...)
		}
		if r.HTTP == nil {
			continue
		}
		if len(r.HTTP.Paths) == 0 {
			errs = append(errs, field.Required(rp.Child("http", "paths"), ""))
		}
		for j, p := range r.HTTP.Paths {
			pp := rp.Child("http", "paths").Index(j)
			if p.PathType == nil {
				errs = append(errs, field.Required(pp.Child("pathType"), "pathType must be specified"))
			} else if !pathTypes.Has(*p.PathType) {
				errs = append(errs, field.NotSupported(pp.Child("pathType"), *p.PathType, sets.List(pathTypes)))
			}
			if p.Path != "" && !strings.HasPrefix(p.Path, "/") {
				errs = append(errs, field.Invalid(pp.Child("path"), p.Path, "must be an absolute path"))
			}
			if p.PathType != nil && *p.PathType != networkingv1.PathTypeImplementationSpecific {
				for _, bad := range []string{"//", "/./", "/../", "%2f", "%2F"} {
					if strings.Contains(p.Path, bad) {
						errs = append(errs, field.Invalid(pp.Child("path"), p.Path, fmt.Sprintf("must not contain '%s'", bad)))
					}
				}
			}
			errs = append(errs, validateBackend(&p.Backend, pp.Child("backend"))...)
		}
	}
	for i, t := range ing.Spec.TLS {
		for j, h := range t.Hosts {
			errs = append(errs, validateHost(h, spec.Child("tls").Index(i).Child("hosts").Index(j))...)
		}
	}
	return errs
}

func validateHost(h string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.Contains(h, "*") {
		errs = append(errs, registry.InvalidEach(path, h, validation.IsWildcardDNS1123Subdomain(h))...)
		return errs
	}
	errs = append(errs, registry.InvalidEach(path, h, validation.IsDNS1123Subdomain(h))...)
	return errs
}

func validateBackend(b *networkingv1.IngressBackend, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case b.Service != nil && b.Resource != nil:
		errs = append(errs, field.Invalid(path, "", "cannot set both resource and service backends"))
	case b.Service != nil:
		if b.Service.Name == "" {
			errs = append(errs, field.Required(path.Child("service", "name"), ""))
		} else {
			errs = append(errs, registry.InvalidEach(path.Child("service", "name"), b.Service.Name, validation.IsDNS1123Label(b.Service.Name))...)
		}
		port := b.Service.Port
		switch {
		case port.Name != "" && port.Number != 0:
			errs = append(errs, field.Invalid(path.Child("service", "port"), port, "cannot set both port name & port number"))
		case port.Name != "":
			errs = append(errs, registry.InvalidEach(path.Child("service", "port", "name"), port.Name, validation.IsValidPortName(port.Name))...)
		case port.Number != 0:
			errs = append(errs, registry.InvalidEach(path.Child("service", "port", "number"), port.Number, validation.IsValidPortNum(int(port.Number)))...)
		default:
			errs = append(errs, field.Required(path.Child("service", "port"), "port name or number is required"))
		}
	case b.Resource != nil:
		if b.Resource.Kind == "" || b.Resource.Name == "" {
			errs = append(errs, field.Required(path.Child("resource"), "kind and name are required"))
		}
	default:
		errs = append(errs, field.Invalid(path, "", "resource or service backend is required"))
	}
	return errs
}

// IngressClass describes networking.k8s.io/v1 IngressClasses.
var IngressClass = &registry.Kind{
	Resource: schema.GroupResource{Group: "networking.k8s.io", Resource: "ingressclasses"},
	Singular: "ingressclass",
	Version:  "v1",
	New:      func() runtime.Object { return &networkingv1.IngressClass{} },
	NewList:  func() runtime.Object { return &networkingv1.IngressClassList{} },
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		ic := obj.(*networkingv1.IngressClass)
		errs := registry.ValidateMeta(ic, false, registry.DNS1123Domain)
		if ic.Spec.Controller == "" {
			errs = append(errs, field.Required(field.NewPath("spec", "controller"), ""))
		} else {
			errs = append(errs, validation.IsDomainPrefixedPath(field.NewPath("spec", "controller"), ic.Spec.Controller)...)
		}
		return errs
	},
	ValidateUpdate: func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		if n, o := obj.(*networkingv1.IngressClass), old.(*networkingv1.IngressClass); n.Spec.Controller != o.Spec.Controller {
			return field.ErrorList{field.Invalid(field.NewPath("spec", "controller"), n.Spec.Controller, "field is immutable")}
		}
		return nil
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Controller", Description: "Controller that is responsible for handling this class"},
			{Name: "Parameters", Description: "A reference to a resource with additional parameters"},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object) []any {
			ic := obj.(*networkingv1.IngressClass)
			params := "<none>"
			if p := ic.Spec.Parameters; p != nil {
				group := ""
				if p.APIGroup != nil {
					group = "." + *p.APIGroup
				}
				params = fmt.Sprintf("%s%s/%s", p.Kind, group, p.Name)
			}
			return []any{ic.Spec.Controller, params, registry.CreationAge(ic)}
		},
	},
}
