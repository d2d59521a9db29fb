package svcstate

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultStickyMaxAgeSeconds is the ClientIP affinity timeout the API
// server defaults to; used when an object carries none or a bad one.
const DefaultStickyMaxAgeSeconds = 10800

// ServicePort is one port of a Service with everything a proxy needs to
// program it. It holds the addresses of every IP family; ForFamily narrows
// it to one. Values in a Snapshot are shared and must not be modified.
type ServicePort struct {
	Name     ServicePortName
	Type     v1.ServiceType
	Protocol v1.Protocol
	Port     int
	NodePort int // 0 when none

	// ClusterIPs is empty for headless and ExternalName services, which
	// proxies skip.
	ClusterIPs      []netip.Addr
	ExternalIPs     []netip.Addr
	LoadBalancerIPs []netip.Addr // status.loadBalancer.ingress IPs in VIP mode

	// LoadBalancerSourceRanges restricts who may use LoadBalancerIPs.
	// SourceRangesSet is true when the Service asked for a restriction,
	// even if none of its ranges could be parsed (or none is of this
	// family): such a service fails closed instead of open.
	LoadBalancerSourceRanges []netip.Prefix
	SourceRangesSet          bool

	SessionAffinityClientIP bool
	StickyMaxAgeSeconds     int // meaningful with SessionAffinityClientIP

	ExternalPolicyLocal bool // externalTrafficPolicy Local on an externally reachable type
	InternalPolicyLocal bool // internalTrafficPolicy Local
	HealthCheckNodePort int  // for LoadBalancer with externalTrafficPolicy Local
}

// ClusterIP returns the cluster IP of family f, or the zero Addr.
func (p *ServicePort) ClusterIP(f v1.IPFamily) netip.Addr {
	for _, a := range p.ClusterIPs {
		if Family(a) == f {
			return a
		}
	}
	return netip.Addr{}
}

// ForFamily returns p with only the addresses and source ranges of family
// f, as a proxy for that family sees it. p itself is returned when nothing
// needs dropping.
func (p *ServicePort) ForFamily(f v1.IPFamily) *ServicePort {
	inFamily := func(a netip.Addr) bool { return Family(a) == f }
	if allOf(p.ClusterIPs, inFamily) && allOf(p.ExternalIPs, inFamily) && allOf(p.LoadBalancerIPs, inFamily) &&
		allOf(p.LoadBalancerSourceRanges, func(r netip.Prefix) bool { return inFamily(r.Addr()) }) {
		return p
	}
	q := *p
	q.ClusterIPs = filter(p.ClusterIPs, inFamily)
	q.ExternalIPs = filter(p.ExternalIPs, inFamily)
	q.LoadBalancerIPs = filter(p.LoadBalancerIPs, inFamily)
	q.LoadBalancerSourceRanges = filter(p.LoadBalancerSourceRanges, func(r netip.Prefix) bool { return inFamily(r.Addr()) })
	return &q
}

// ExternallyAccessible reports whether traffic may reach the port other
// than through its cluster IP. Evaluate it on a ForFamily view.
func (p *ServicePort) ExternallyAccessible() bool {
	return p.NodePort != 0 || len(p.LoadBalancerIPs) > 0 || len(p.ExternalIPs) > 0
}

// UsesClusterEndpoints reports whether any traffic to the port is spread
// over the whole cluster. A Local external policy still needs cluster-wide
// endpoints: traffic from pods and the node to external addresses is
// short-circuited to them.
func (p *ServicePort) UsesClusterEndpoints() bool {
	return !p.InternalPolicyLocal || p.ExternallyAccessible()
}

// UsesLocalEndpoints reports whether any traffic to the port is limited to
// this node's endpoints.
func (p *ServicePort) UsesLocalEndpoints() bool {
	return p.InternalPolicyLocal || (p.ExternalPolicyLocal && p.ExternallyAccessible())
}

// Proxied reports whether proxies program the port at all: headless and
// ExternalName services are left to DNS.
func (p *ServicePort) Proxied() bool { return len(p.ClusterIPs) > 0 }

func (p *ServicePort) equal(o *ServicePort) bool {
	return p.Name == o.Name && p.Type == o.Type && p.Protocol == o.Protocol && p.Port == o.Port &&
		p.NodePort == o.NodePort && slices.Equal(p.ClusterIPs, o.ClusterIPs) &&
		slices.Equal(p.ExternalIPs, o.ExternalIPs) && slices.Equal(p.LoadBalancerIPs, o.LoadBalancerIPs) &&
		slices.Equal(p.LoadBalancerSourceRanges, o.LoadBalancerSourceRanges) && p.SourceRangesSet == o.SourceRangesSet &&
		p.SessionAffinityClientIP == o.SessionAffinityClientIP && p.StickyMaxAgeSeconds == o.StickyMaxAgeSeconds &&
		p.ExternalPolicyLocal == o.ExternalPolicyLocal && p.InternalPolicyLocal == o.InternalPolicyLocal &&
		p.HealthCheckNodePort == o.HealthCheckNodePort
}

// Service is one Service with its ports and the endpoints of its
// EndpointSlices. Values in a Snapshot are shared and must not be modified.
type Service struct {
	Name         types.NamespacedName
	Type         v1.ServiceType
	ClusterIPs   []netip.Addr
	Headless     bool   // clusterIP None
	ExternalName string // for type ExternalName

	// Ports are in spec order, minus those that could not be used.
	Ports []*ServicePort

	// endpoints holds every port found in the Service's EndpointSlices,
	// including ports the Service does not (or no longer) define, and
	// endpoints of slices without ports under a ServicePortName with empty
	// Port and Protocol (headless services without ports, for DNS).
	endpoints map[ServicePortName][]Endpoint
}

// Port returns the service port named n, or nil.
func (s *Service) Port(n ServicePortName) *ServicePort {
	for _, p := range s.Ports {
		if p.Name == n {
			return p
		}
	}
	return nil
}

// Endpoints returns the endpoints of port n, merged over all slices,
// deduplicated and ordered by "ip:port" string as kube-proxy orders them.
func (s *Service) Endpoints(n ServicePortName) []Endpoint { return s.endpoints[n] }

// EndpointPorts returns the names under which endpoints are known,
// unordered.
func (s *Service) EndpointPorts() []ServicePortName {
	out := make([]ServicePortName, 0, len(s.endpoints))
	for n := range s.endpoints {
		out = append(out, n)
	}
	return out
}

// parseService turns a Service into its ports, dropping what it cannot
// use. Endpoints are filled in later from the slices.
func parseService(svc *v1.Service, report func(BadInput)) *Service {
	nn := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	bad := func(field, value string, r Reason) {
		report(BadInput{Kind: KindService, Object: nn, Field: field, Value: value, Reason: r})
	}
	s := &Service{Name: nn, Type: svc.Spec.Type, ExternalName: svc.Spec.ExternalName}
	if s.Type == "" {
		s.Type = v1.ServiceTypeClusterIP
	}

	clusterIPs := svc.Spec.ClusterIPs
	if len(clusterIPs) == 0 && svc.Spec.ClusterIP != "" {
		clusterIPs = []string{svc.Spec.ClusterIP}
	}
	for i, raw := range clusterIPs {
		if raw == v1.ClusterIPNone {
			s.Headless = true
			continue
		}
		if raw == "" {
			continue
		}
		field := fmt.Sprintf("spec.clusterIPs[%d]", i)
		a, r := parseIP(raw)
		switch {
		case r != "":
			bad(field, raw, r)
		case slices.ContainsFunc(s.ClusterIPs, func(b netip.Addr) bool { return Family(a) == Family(b) }):
			bad(field, raw, ReasonDuplicate)
		default:
			s.ClusterIPs = append(s.ClusterIPs, a)
		}
	}
	if s.Type == v1.ServiceTypeExternalName {
		// An ExternalName service is a DNS alias; any IPs it carries are
		// leftovers from an earlier type and must not be proxied.
		s.ClusterIPs = nil
	}

	externalIPs := parseIPList(svc.Spec.ExternalIPs, "spec.externalIPs", bad)
	var lbIPs []netip.Addr
	for i, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP == "" {
			continue
		}
		// A Proxy-mode load balancer delivers to the node's NodePort with
		// its own address as destination; capturing the VIP would hijack
		// traffic meant for the load balancer itself.
		if ing.IPMode != nil && *ing.IPMode == v1.LoadBalancerIPModeProxy {
			continue
		}
		field := fmt.Sprintf("status.loadBalancer.ingress[%d].ip", i)
		a, r := parseIP(ing.IP)
		switch {
		case r != "":
			bad(field, ing.IP, r)
		case slices.Contains(lbIPs, a):
			bad(field, ing.IP, ReasonDuplicate)
		default:
			lbIPs = append(lbIPs, a)
		}
	}
	var ranges []netip.Prefix
	for i, raw := range svc.Spec.LoadBalancerSourceRanges {
		p, ok := parseCIDR(raw)
		if !ok {
			bad(fmt.Sprintf("spec.loadBalancerSourceRanges[%d]", i), raw, ReasonMalformedCIDR)
			continue
		}
		if !slices.Contains(ranges, p) {
			ranges = append(ranges, p)
		}
	}

	affinity := svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP
	sticky := 0
	if affinity {
		sticky = DefaultStickyMaxAgeSeconds
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			if t := *c.ClientIP.TimeoutSeconds; t > 0 && t <= 86400 {
				sticky = int(t)
			} else {
				bad("spec.sessionAffinityConfig.clientIP.timeoutSeconds", strconv.Itoa(int(t)), ReasonBadAffinityTimeout)
			}
		}
	}

	externallyAccessible := s.Type == v1.ServiceTypeLoadBalancer || s.Type == v1.ServiceTypeNodePort ||
		(s.Type == v1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0)
	etpLocal := externallyAccessible && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
	itpLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal
	hcPort := 0
	if s.Type == v1.ServiceTypeLoadBalancer && etpLocal {
		if p := svc.Spec.HealthCheckNodePort; validPort(p) {
			hcPort = int(p)
		} else {
			bad("spec.healthCheckNodePort", strconv.Itoa(int(p)), ReasonMissingHealthCheck)
		}
	}

	type portKey struct {
		port  int32
		proto v1.Protocol
	}
	seenNames := map[ServicePortName]bool{}
	seenPorts := map[portKey]bool{}
	for i, sp := range svc.Spec.Ports {
		field := fmt.Sprintf("spec.ports[%d]", i)
		proto := sp.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		if !validProtocol(proto) {
			bad(field+".protocol", string(proto), ReasonUnknownProtocol)
			continue
		}
		if !validPort(sp.Port) {
			bad(field+".port", strconv.Itoa(int(sp.Port)), ReasonPortOutOfRange)
			continue
		}
		name := ServicePortName{NamespacedName: nn, Port: sp.Name, Protocol: proto}
		if seenNames[name] || seenPorts[portKey{sp.Port, proto}] {
			bad(field, name.String()+"/"+string(proto), ReasonDuplicate)
			continue
		}
		seenNames[name] = true
		seenPorts[portKey{sp.Port, proto}] = true
		nodePort := 0
		if sp.NodePort != 0 {
			if validPort(sp.NodePort) {
				nodePort = int(sp.NodePort)
			} else {
				bad(field+".nodePort", strconv.Itoa(int(sp.NodePort)), ReasonPortOutOfRange)
			}
		}
		s.Ports = append(s.Ports, &ServicePort{
			Name:                     name,
			Type:                     s.Type,
			Protocol:                 proto,
			Port:                     int(sp.Port),
			NodePort:                 nodePort,
			ClusterIPs:               s.ClusterIPs,
			ExternalIPs:              externalIPs,
			LoadBalancerIPs:          lbIPs,
			LoadBalancerSourceRanges: ranges,
			SourceRangesSet:          len(svc.Spec.LoadBalancerSourceRanges) > 0,
			SessionAffinityClientIP:  affinity,
			StickyMaxAgeSeconds:      sticky,
			ExternalPolicyLocal:      etpLocal,
			InternalPolicyLocal:      itpLocal,
			HealthCheckNodePort:      hcPort,
		})
	}
	return s
}

func parseIPList(raw []string, field string, bad func(field, value string, r Reason)) []netip.Addr {
	var out []netip.Addr
	for i, s := range raw {
		f := fmt.Sprintf("%s[%d]", field, i)
		a, r := parseIP(s)
		switch {
		case r != "":
			bad(f, s, r)
		case slices.Contains(out, a):
			bad(f, s, ReasonDuplicate)
		default:
			out = append(out, a)
		}
	}
	return out
}

func allOf[T any](s []T, f func(T) bool) bool {
	for _, v := range s {
		if !f(v) {
			return false
		}
	}
	return true
}

func filter[T any](s []T, keep func(T) bool) []T {
	var out []T
	for _, v := range s {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}
