// Package discovery is the registry of discovery.k8s.io/v1 EndpointSlices.
package discovery

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

const (
	maxEndpoints = 1000
	maxPorts     = 100
)

var addressTypes = sets.New(discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN)

// EndpointSlice describes discovery.k8s.io/v1 EndpointSlices.
var EndpointSlice = &registry.Kind{
	Resource:   schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"},
	Singular:   "endpointslice",
	Version:    "v1",
	Namespaced: true,
	New:        func() runtime.Object { return &discoveryv1.EndpointSlice{} },
	NewList:    func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
	Generation: true,
	// EndpointSlices have no spec: their content is what counts changes.
	PrepareForUpdate: func(_ context.Context, obj, old runtime.Object) {
		n, o := obj.(*discoveryv1.EndpointSlice), old.(*discoveryv1.EndpointSlice)
		if !apiequality.Semantic.DeepEqual(n.Endpoints, o.Endpoints) || !apiequality.Semantic.DeepEqual(n.Ports, o.Ports) {
			n.Generation = o.Generation + 1
		}
	},
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		return validate(obj.(*discoveryv1.EndpointSlice))
	},
	ValidateUpdate: func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		if n, o := obj.(*discoveryv1.EndpointSlice), old.(*discoveryv1.EndpointSlice); n.AddressType != o.AddressType {
			return field.ErrorList{field.Invalid(field.NewPath("addressType"), n.AddressType, "field is immutable")}
		}
		return nil
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "AddressType", Description: "Type of address carried by this EndpointSlice"},
			{Name: "Ports", Description: "Ports of the endpoints"},
			{Name: "Endpoints", Description: "Addresses of the endpoints"},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object) []any {
			s := obj.(*discoveryv1.EndpointSlice)
			var ports []string
			for _, p := range s.Ports {
				if p.Port != nil {
					ports = append(ports, fmt.Sprint(*p.Port))
				}
			}
			portCol := strings.Join(ports, ",")
			if len(s.Ports) == 0 {
				portCol = "<unset>"
			}
			var addrs registry.Abbrev
			for _, ep := range s.Endpoints {
				for _, a := range ep.Addresses {
					addrs.Add(a)
				}
			}
			return []any{string(s.AddressType), portCol, addrs.String("<unset>"), registry.CreationAge(s)}
		},
	},
}

func validate(s *discoveryv1.EndpointSlice) field.ErrorList {
	errs := registry.ValidateMeta(s, true, registry.DNS1123Domain)
	if !addressTypes.Has(s.AddressType) {
		errs = append(errs, field.NotSupported(field.NewPath("addressType"), s.AddressType, sets.List(addressTypes)))
	}
	if len(s.Endpoints) > maxEndpoints {
		errs = append(errs, field.TooMany(field.NewPath("endpoints"), len(s.Endpoints), maxEndpoints))
	}
	for i, ep := range s.Endpoints {
		ep := ep
		p := field.NewPath("endpoints").Index(i)
		if len(ep.Addresses) == 0 || len(ep.Addresses) > 100 {
			errs = append(errs, field.Invalid(p.Child("addresses"), len(ep.Addresses), "must contain at least 1 and at most 100 addresses"))
		}
		for j, a := range ep.Addresses {
			ap := p.Child("addresses").Index(j)
			switch s.AddressType {
			case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
				ip, err := netip.ParseAddr(a)
				if err != nil || ip.Is4() != (s.AddressType == discoveryv1.AddressTypeIPv4) {
					errs = append(errs, field.Invalid(ap, a, fmt.Sprintf("must be a valid %s address", s.AddressType)))
				}
			case discoveryv1.AddressTypeFQDN:
				errs = append(errs, validation.IsFullyQualifiedDomainName(ap, a)...)
			}
		}
		if ep.Hostname != nil {
			errs = append(errs, registry.InvalidEach(p.Child("hostname"), *ep.Hostname, validation.IsDNS1123Label(*ep.Hostname))...)
		}
		if ep.NodeName != nil {
			errs = append(errs, registry.InvalidEach(p.Child("nodeName"), *ep.NodeName, validation.IsDNS1123Subdomain(*ep.NodeName))...)
		}
	}
	if len(s.Ports) > maxPorts {
		errs = append(errs, field.TooMany(field.NewPath("ports"), len(s.Ports), maxPorts))
	}
	names := sets.New[string]()
	for i, port := range s.Ports {
		p := field.NewPath("ports").Index(i)
		if port.Name != nil {
			if *port.Name != "" {
				errs = append(errs, registry.InvalidEach(p.Child("name"), *port.Name, validation.IsDNS1123Label(*port.Name))...)
			}
			if names.Has(*port.Name) {
				errs = append(errs, field.Duplicate(p.Child("name"), *port.Name))
			}
			names.Insert(*port.Name)
		}
		if port.Protocol != nil && *port.Protocol != corev1.ProtocolTCP && *port.Protocol != corev1.ProtocolUDP && *port.Protocol != corev1.ProtocolSCTP {
			errs = append(errs, field.NotSupported(p.Child("protocol"), *port.Protocol, []string{"SCTP", "TCP", "UDP"}))
		}
		if port.Port != nil {
			errs = append(errs, registry.InvalidEach(p.Child("port"), *port.Port, validation.IsValidPortNum(int(*port.Port)))...)
		}
	}
	return errs
}
