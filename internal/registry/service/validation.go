package service

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

var (
	supportedTypes = sets.New(corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort,
		corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName)
	supportedProtocols = sets.New(corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP)
	supportedAffinity  = sets.New(corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP)
	supportedETP       = sets.New(corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal)
	supportedITP       = sets.New(corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal)
	supportedFamilies  = sets.New(corev1.IPv4Protocol, corev1.IPv6Protocol)
	supportedPolicies  = sets.New(corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack,
		corev1.IPFamilyPolicyRequireDualStack)
)

// Validate checks a Service the way kube-apiserver's ValidateService does.
func Validate(svc *corev1.Service) field.ErrorList {
	errs := registry.ValidateMeta(svc, true, registry.DNS1123Label)
	spec := &svc.Spec
	specPath := field.NewPath("spec")

	if !supportedTypes.Has(spec.Type) {
		errs = append(errs, field.NotSupported(specPath.Child("type"), spec.Type, sets.List(supportedTypes)))
	}
	headless := spec.ClusterIP == corev1.ClusterIPNone
	external := spec.Type == corev1.ServiceTypeNodePort || spec.Type == corev1.ServiceTypeLoadBalancer

	switch {
	case spec.Type == corev1.ServiceTypeExternalName:
		if spec.ExternalName == "" {
			errs = append(errs, field.Required(specPath.Child("externalName"), "for ExternalName services"))
		} else {
			errs = append(errs, registry.InvalidEach(specPath.Child("externalName"), spec.ExternalName, validation.IsDNS1123Subdomain(strings.TrimSuffix(spec.ExternalName, ".")))...)
		}
		if spec.ClusterIP != "" {
			errs = append(errs, field.Forbidden(specPath.Child("clusterIP"), "may not be set for ExternalName services"))
		}
		if len(spec.ClusterIPs) > 0 {
			errs = append(errs, field.Forbidden(specPath.Child("clusterIPs"), "may not be set for ExternalName services"))
		}
		if len(spec.IPFamilies) > 0 {
			errs = append(errs, field.Forbidden(specPath.Child("ipFamilies"), "may not be set for ExternalName services"))
		}
		if spec.IPFamilyPolicy != nil {
			errs = append(errs, field.Forbidden(specPath.Child("ipFamilyPolicy"), "may not be set for ExternalName services"))
		}
	default:
		if spec.ExternalName != "" {
			errs = append(errs, field.Forbidden(specPath.Child("externalName"), "may only be set for ExternalName services"))
		}
		if len(spec.Ports) == 0 && !headless {
			errs = append(errs, field.Required(specPath.Child("ports"), ""))
		}
		if headless && external {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), spec.ClusterIP,
				fmt.Sprintf("may not be set to 'None' for %s services", spec.Type)))
		}
	}
	errs = append(errs, validateClusterIPs(spec, specPath)...)
	errs = append(errs, validatePorts(spec, specPath)...)

	if spec.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabels(spec.Selector, specPath.Child("selector"))...)
	}
	if !supportedAffinity.Has(spec.SessionAffinity) {
		errs = append(errs, field.NotSupported(specPath.Child("sessionAffinity"), spec.SessionAffinity, sets.List(supportedAffinity)))
	}
	if spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		if c := spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			if t := *c.ClientIP.TimeoutSeconds; t <= 0 || t > maxAffinitySeconds {
				errs = append(errs, field.Invalid(specPath.Child("sessionAffinityConfig", "clientIP", "timeoutSeconds"), t,
					fmt.Sprintf("must be greater than 0 and less than %d", maxAffinitySeconds)))
			}
		}
	} else if spec.SessionAffinityConfig != nil {
		errs = append(errs, field.Forbidden(specPath.Child("sessionAffinityConfig"),
			fmt.Sprintf("must not be set when session affinity is %s", spec.SessionAffinity)))
	}
	for i, ip := range spec.ExternalIPs {
		if a, err := netip.ParseAddr(ip); err != nil {
			errs = append(errs, field.Invalid(specPath.Child("externalIPs").Index(i), ip, "must be a valid IP address"))
		} else if a.IsLoopback() || a.IsUnspecified() || a.IsMulticast() || a.IsLinkLocalUnicast() {
			errs = append(errs, field.Invalid(specPath.Child("externalIPs").Index(i), ip, "may not be loopback, unspecified, multicast or link-local"))
		}
	}
	if spec.ExternalTrafficPolicy != "" {
		if !external {
			errs = append(errs, field.Invalid(specPath.Child("externalTrafficPolicy"), spec.ExternalTrafficPolicy,
				"may only be set for externally-accessible services"))
		} else if !supportedETP.Has(spec.ExternalTrafficPolicy) {
			errs = append(errs, field.NotSupported(specPath.Child("externalTrafficPolicy"), spec.ExternalTrafficPolicy, sets.List(supportedETP)))
		}
	} else if external {
		errs = append(errs, field.Required(specPath.Child("externalTrafficPolicy"), ""))
	}
	if p := spec.InternalTrafficPolicy; p != nil && !supportedITP.Has(*p) {
		errs = append(errs, field.NotSupported(specPath.Child("internalTrafficPolicy"), *p, sets.List(supportedITP)))
	}
	if spec.HealthCheckNodePort != 0 {
		if spec.Type != corev1.ServiceTypeLoadBalancer || spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
			errs = append(errs, field.Invalid(specPath.Child("healthCheckNodePort"), spec.HealthCheckNodePort,
				"may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
		} else {
			errs = append(errs, registry.InvalidEach(specPath.Child("healthCheckNodePort"), spec.HealthCheckNodePort, validation.IsValidPortNum(int(spec.HealthCheckNodePort)))...)
		}
	}
	if spec.Type != corev1.ServiceTypeLoadBalancer {
		if len(spec.LoadBalancerSourceRanges) > 0 {
			errs = append(errs, field.Forbidden(specPath.Child("loadBalancerSourceRanges"), "may only be used when `type` is 'LoadBalancer'"))
		}
		if spec.LoadBalancerIP != "" {
			errs = append(errs, field.Forbidden(specPath.Child("loadBalancerIP"), "may only be used when `type` is 'LoadBalancer'"))
		}
		if spec.LoadBalancerClass != nil {
			errs = append(errs, field.Forbidden(specPath.Child("loadBalancerClass"), "may only be used when `type` is 'LoadBalancer'"))
		}
		if spec.AllocateLoadBalancerNodePorts != nil {
			errs = append(errs, field.Forbidden(specPath.Child("allocateLoadBalancerNodePorts"), "may only be used when `type` is 'LoadBalancer'"))
		}
	}
	for i, r := range spec.LoadBalancerSourceRanges {
		if _, err := netip.ParsePrefix(strings.TrimSpace(r)); err != nil {
			errs = append(errs, field.Invalid(specPath.Child("loadBalancerSourceRanges").Index(i), r,
				"must be a list of IP ranges. For example, 10.240.0.0/24,10.250.0.0/24"))
		}
	}
	if spec.LoadBalancerIP != "" {
		if _, err := netip.ParseAddr(spec.LoadBalancerIP); err != nil {
			errs = append(errs, field.Invalid(specPath.Child("loadBalancerIP"), spec.LoadBalancerIP, "must be a valid IP address"))
		}
	}
	if c := spec.LoadBalancerClass; c != nil {
		errs = append(errs, metav1validation.ValidateLabelName(*c, specPath.Child("loadBalancerClass"))...)
	}
	return errs
}

func validateClusterIPs(spec *corev1.ServiceSpec, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(spec.ClusterIPs) > 0 && spec.ClusterIP != spec.ClusterIPs[0] {
		errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), spec.ClusterIPs[0],
			"must be equal to spec.clusterIP when both are set"))
	}
	if len(spec.ClusterIPs) > 2 {
		errs = append(errs, field.TooMany(specPath.Child("clusterIPs"), len(spec.ClusterIPs), 2))
	}
	ips := spec.ClusterIPs
	if len(ips) == 0 && spec.ClusterIP != "" {
		ips = []string{spec.ClusterIP}
	}
	for i, ip := range ips {
		if ip == corev1.ClusterIPNone {
			if i > 0 || len(ips) > 1 {
				errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(i), ip, "'None' must be the first and only value"))
			}
			continue
		}
		a, err := netip.ParseAddr(ip)
		if err != nil || a.Zone() != "" {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(i), ip,
				"must be empty, 'None', or a valid IP address"))
			continue
		}
		if i < len(spec.IPFamilies) && familyOf(a) != spec.IPFamilies[i] {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(i), ip,
				fmt.Sprintf("expected an %s value as indicated by `ipFamilies[%d]`", spec.IPFamilies[i], i)))
		}
	}
	if len(ips) == 2 && ips[1] != corev1.ClusterIPNone {
		a, err1 := netip.ParseAddr(ips[0])
		b, err2 := netip.ParseAddr(ips[1])
		if err1 == nil && err2 == nil && a.Is4() == b.Is4() {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(1), ips[1], "may specify no more than one IP for each IP family"))
		}
	}
	for i, f := range spec.IPFamilies {
		if !supportedFamilies.Has(f) {
			errs = append(errs, field.NotSupported(specPath.Child("ipFamilies").Index(i), f, sets.List(supportedFamilies)))
		}
		if i == 1 && f == spec.IPFamilies[0] {
			errs = append(errs, field.Duplicate(specPath.Child("ipFamilies").Index(i), f))
		}
	}
	if len(spec.IPFamilies) > 2 {
		errs = append(errs, field.TooMany(specPath.Child("ipFamilies"), len(spec.IPFamilies), 2))
	}
	if p := spec.IPFamilyPolicy; p != nil {
		if !supportedPolicies.Has(*p) {
			errs = append(errs, field.NotSupported(specPath.Child("ipFamilyPolicy"), *p, sets.List(supportedPolicies)))
		} else if *p == corev1.IPFamilyPolicySingleStack && (len(spec.IPFamilies) > 1 || len(spec.ClusterIPs) > 1) {
			errs = append(errs, field.Invalid(specPath.Child("ipFamilyPolicy"), *p,
				"must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"))
		}
	}
	return errs
}

func validatePorts(spec *corev1.ServiceSpec, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	type portKey struct {
		port  int32
		proto corev1.Protocol
	}
	seen := map[portKey]bool{}
	seenNodePorts := map[portKey]bool{}
	for i, p := range spec.Ports {
		pp := specPath.Child("ports").Index(i)
		if len(spec.Ports) > 1 || p.Name != "" {
			if p.Name == "" {
				errs = append(errs, field.Required(pp.Child("name"), ""))
			} else {
				errs = append(errs, registry.UniqueName(pp.Child("name"), p.Name, validation.IsDNS1123Label, names)...)
			}
		}
		errs = append(errs, registry.InvalidEach(pp.Child("port"), p.Port, validation.IsValidPortNum(int(p.Port)))...)
		if !supportedProtocols.Has(p.Protocol) {
			errs = append(errs, field.NotSupported(pp.Child("protocol"), p.Protocol, sets.List(supportedProtocols)))
		}
		errs = append(errs, validateTargetPort(p.TargetPort, pp.Child("targetPort"))...)
		key := portKey{p.Port, p.Protocol}
		if seen[key] {
			errs = append(errs, field.Duplicate(pp, fmt.Sprintf("%d/%s", p.Port, p.Protocol)))
		}
		seen[key] = true
		if p.NodePort != 0 {
			if spec.Type != corev1.ServiceTypeNodePort && spec.Type != corev1.ServiceTypeLoadBalancer {
				errs = append(errs, field.Forbidden(pp.Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
			}
			errs = append(errs, registry.InvalidEach(pp.Child("nodePort"), p.NodePort, validation.IsValidPortNum(int(p.NodePort)))...)
			nk := portKey{p.NodePort, p.Protocol}
			if seenNodePorts[nk] {
				errs = append(errs, field.Duplicate(pp.Child("nodePort"), p.NodePort))
			}
			seenNodePorts[nk] = true
		}
		if p.AppProtocol != nil {
			errs = append(errs, registry.InvalidEach(pp.Child("appProtocol"), *p.AppProtocol, validation.IsQualifiedName(*p.AppProtocol))...)
		}
	}
	return errs
}

func validateTargetPort(tp intstr.IntOrString, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if tp.Type == intstr.String {
		errs = append(errs, registry.InvalidEach(path, tp.StrVal, validation.IsValidPortName(tp.StrVal))...)
		return errs
	}
	errs = append(errs, registry.InvalidEach(path, tp.IntVal, validation.IsValidPortNum(int(tp.IntVal)))...)
	return errs
}

// ValidateUpdate adds the rules that compare a Service with its old self.
func ValidateUpdate(svc, old *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	specPath := field.NewPath("spec")
	// An allocated cluster IP is immutable, unless the service becomes or
	// stops being an ExternalName (which has none).
	if old.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.Type != corev1.ServiceTypeExternalName {
		if old.Spec.ClusterIP != "" && svc.Spec.ClusterIP != old.Spec.ClusterIP {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), svc.Spec.ClusterIP, "may not change once set"))
		} else if len(old.Spec.ClusterIPs) > 0 && len(svc.Spec.ClusterIPs) > 0 && svc.Spec.ClusterIPs[0] != old.Spec.ClusterIPs[0] {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), svc.Spec.ClusterIPs[0], "may not change once set"))
		}
	}
	return errs
}

func familyOf(a netip.Addr) corev1.IPFamily {
	if a.Is4() || a.Is4In6() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

// maxAffinitySeconds is the longest ClientIP session affinity (one day).
const maxAffinitySeconds = 86400
