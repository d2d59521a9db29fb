package networking

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// DefaultServiceCIDR is the name of the ServiceCIDR that the API server
// keeps for its --service-cluster-ip-range, as kube-apiserver does.
const DefaultServiceCIDR = "kubernetes"

// ServiceCIDR describes networking.k8s.io/v1 ServiceCIDRs. svcnet's
// allocator serves the API server's own range only: ServiceCIDRs other
// than the default are stored, not used for allocation.
var ServiceCIDR = &registry.Kind{
	Resource:   schema.GroupResource{Group: "networking.k8s.io", Resource: "servicecidrs"},
	Singular:   "servicecidr",
	Version:    "v1",
	New:        func() runtime.Object { return &networkingv1.ServiceCIDR{} },
	NewList:    func() runtime.Object { return &networkingv1.ServiceCIDRList{} },
	Status:     true,
	Generation: true,
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		sc := obj.(*networkingv1.ServiceCIDR)
		return append(registry.ValidateMeta(sc, false, registry.DNS1123Domain), validateCIDRs(sc.Spec.CIDRs)...)
	},
	ValidateUpdate: func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		n, o := obj.(*networkingv1.ServiceCIDR), old.(*networkingv1.ServiceCIDR)
		errs := validateCIDRs(n.Spec.CIDRs)
		// As kube-apiserver: a single-family range may gain its other
		// family; nothing else changes.
		if len(o.Spec.CIDRs) == 1 && len(n.Spec.CIDRs) == 2 && n.Spec.CIDRs[0] == o.Spec.CIDRs[0] {
			return errs
		}
		return append(errs, apimachineryvalidation.ValidateImmutableField(n.Spec.CIDRs, o.Spec.CIDRs, field.NewPath("spec", "cidrs"))...)
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "CIDRs", Description: "CIDRs defines the IP blocks in CIDR notation"},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object) []any {
			sc := obj.(*networkingv1.ServiceCIDR)
			return []any{strings.Join(sc.Spec.CIDRs, ","), registry.CreationAge(sc)}
		},
	},
}

func validateCIDRs(cidrs []string) field.ErrorList {
	path := field.NewPath("spec", "cidrs")
	var errs field.ErrorList
	if len(cidrs) == 0 || len(cidrs) > 2 {
		return field.ErrorList{field.Invalid(path, cidrs, "one or two CIDRs, one per IP family")}
	}
	families := map[bool]bool{}
	for i, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil || p.Masked() != p || p.String() != c {
			errs = append(errs, field.Invalid(path.Index(i), c, "must be a valid CIDR in canonical form (e.g. 10.96.0.0/12)"))
			continue
		}
		if families[p.Addr().Is4()] {
			errs = append(errs, field.Invalid(path, cidrs, "may specify no more than one CIDR for each IP family"))
		}
		families[p.Addr().Is4()] = true
	}
	return errs
}

// IPAddress describes networking.k8s.io/v1 IPAddresses: stored and
// served; svcnet's allocator keeps its own record of the cluster IPs it
// gives out and writes none (kube-apiserver 1.33+ writes one per cluster
// IP).
var IPAddress = &registry.Kind{
	Resource:   schema.GroupResource{Group: "networking.k8s.io", Resource: "ipaddresses"},
	Singular:   "ipaddress",
	Version:    "v1",
	New:        func() runtime.Object { return &networkingv1.IPAddress{} },
	NewList:    func() runtime.Object { return &networkingv1.IPAddressList{} },
	ShortNames: []string{"ip"},
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		ip := obj.(*networkingv1.IPAddress)
		errs := registry.ValidateMeta(ip, false, validIPName)
		ref := ip.Spec.ParentRef
		path := field.NewPath("spec", "parentRef")
		switch {
		case ref == nil:
			errs = append(errs, field.Required(path, ""))
		default:
			if ref.Resource == "" {
				errs = append(errs, field.Required(path.Child("resource"), ""))
			}
			if ref.Name == "" {
				errs = append(errs, field.Required(path.Child("name"), ""))
			}
		}
		return errs
	},
	ValidateUpdate: func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		n, o := obj.(*networkingv1.IPAddress), old.(*networkingv1.IPAddress)
		return apimachineryvalidation.ValidateImmutableField(n.Spec.ParentRef, o.Spec.ParentRef, field.NewPath("spec", "parentRef"))
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "ParentRef", Description: "ParentRef references the resource that an IPAddress is attached to"},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object) []any {
			ip := obj.(*networkingv1.IPAddress)
			parent := "<none>"
			if r := ip.Spec.ParentRef; r != nil {
				parent = fmt.Sprintf("%s/%s", r.Resource, r.Name)
				if r.Namespace != "" {
					parent = fmt.Sprintf("%s/%s/%s", r.Resource, r.Namespace, r.Name)
				}
			}
			return []any{parent, registry.CreationAge(ip)}
		},
	},
}

// validIPName: an IPAddress is named by its address, in canonical form
// (no leading zeros, IPv6 compressed, no zone).
func validIPName(name string, prefix bool) []string {
	if prefix {
		return []string{"generateName is not supported for IPAddresses"}
	}
	a, err := netip.ParseAddr(name)
	if err != nil || a.Zone() != "" || a.Is4In6() || a.String() != name {
		return []string{"must be a valid IP address in canonical form"}
	}
	return nil
}
