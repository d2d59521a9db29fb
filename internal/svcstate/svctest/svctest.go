// Package svctest builds Service and EndpointSlice objects for tests of the
// tracker and of everything that consumes its snapshots.
package svctest

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// ServiceOption changes a Service under construction.
type ServiceOption func(*v1.Service)

// Service returns a ClusterIP Service; clusterIP may be "None" or "".
func Service(ns, name, clusterIP string, opts ...ServiceOption) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			Type:      v1.ServiceTypeClusterIP,
			ClusterIP: clusterIP,
		},
	}
	if clusterIP != "" {
		s.Spec.ClusterIPs = []string{clusterIP}
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Port adds a port; nodePort 0 means none.
func Port(name string, proto v1.Protocol, port, nodePort int32) ServiceOption {
	return func(s *v1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{
			Name: name, Protocol: proto, Port: port, NodePort: nodePort,
			TargetPort: intstr.FromString(name),
		})
	}
}

// Type sets the service type.
func Type(t v1.ServiceType) ServiceOption { return func(s *v1.Service) { s.Spec.Type = t } }

// ClusterIPs sets the cluster IPs of a dual-stack service.
func ClusterIPs(ips ...string) ServiceOption {
	return func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = ips[0], ips }
}

// ExternalIPs sets spec.externalIPs.
func ExternalIPs(ips ...string) ServiceOption {
	return func(s *v1.Service) { s.Spec.ExternalIPs = ips }
}

// LoadBalancer makes the service a LoadBalancer with the given ingress IPs.
func LoadBalancer(ips ...string) ServiceOption {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Status.LoadBalancer.Ingress = nil
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
		}
	}
}

// SourceRanges sets spec.loadBalancerSourceRanges.
func SourceRanges(cidrs ...string) ServiceOption {
	return func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = cidrs }
}

// Affinity sets sessionAffinity ClientIP with a timeout.
func Affinity(seconds int32) ServiceOption {
	return func(s *v1.Service) {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(seconds)}}
	}
}

// ExternalLocal sets externalTrafficPolicy Local with a health check node
// port (0 for NodePort services, which have none).
func ExternalLocal(healthCheckNodePort int32) ServiceOption {
	return func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = healthCheckNodePort
	}
}

// InternalLocal sets internalTrafficPolicy Local.
func InternalLocal() ServiceOption {
	return func(s *v1.Service) {
		s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	}
}

// ResourceVersion sets metadata.resourceVersion.
func ResourceVersion(rv string) ServiceOption {
	return func(s *v1.Service) { s.ResourceVersion = rv }
}

// SliceOption changes an EndpointSlice under construction.
type SliceOption func(*discovery.EndpointSlice)

// Slice returns an IPv4 EndpointSlice of service svc.
func Slice(ns, svc, name string, opts ...SliceOption) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{discovery.LabelServiceName: svc},
		},
		AddressType: discovery.AddressTypeIPv4,
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// AddressType sets the slice's address type.
func AddressType(t discovery.AddressType) SliceOption {
	return func(s *discovery.EndpointSlice) { s.AddressType = t }
}

// SlicePort adds a port.
func SlicePort(name string, proto v1.Protocol, port int32) SliceOption {
	return func(s *discovery.EndpointSlice) {
		s.Ports = append(s.Ports, discovery.EndpointPort{Name: ptr.To(name), Protocol: ptr.To(proto), Port: ptr.To(port)})
	}
}

// TriggerTime sets the endpoints.kubernetes.io/last-change-trigger-time
// annotation.
func TriggerTime(t time.Time) SliceOption {
	return func(s *discovery.EndpointSlice) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[v1.EndpointsLastChangeTriggerTime] = t.Format(time.RFC3339Nano)
	}
}

// SliceResourceVersion sets metadata.resourceVersion.
func SliceResourceVersion(rv string) SliceOption {
	return func(s *discovery.EndpointSlice) { s.ResourceVersion = rv }
}

// EndpointOption changes an endpoint under construction.
type EndpointOption func(*discovery.Endpoint)

// Endpoint adds a ready endpoint on node.
func Endpoint(ip, node string, opts ...EndpointOption) SliceOption {
	return func(s *discovery.EndpointSlice) {
		e := discovery.Endpoint{
			Addresses: []string{ip},
			Conditions: discovery.EndpointConditions{
				Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false),
			},
		}
		if node != "" {
			e.NodeName = ptr.To(node)
		}
		for _, o := range opts {
			o(&e)
		}
		s.Endpoints = append(s.Endpoints, e)
	}
}

// NotReady marks an endpoint not ready and not serving.
func NotReady() EndpointOption {
	return func(e *discovery.Endpoint) {
		e.Conditions.Ready, e.Conditions.Serving = ptr.To(false), ptr.To(false)
	}
}

// Terminating marks an endpoint terminating (hence not ready), still
// serving or not.
func Terminating(serving bool) EndpointOption {
	return func(e *discovery.Endpoint) {
		e.Conditions.Ready, e.Conditions.Serving, e.Conditions.Terminating = ptr.To(false), ptr.To(serving), ptr.To(true)
	}
}

// Zone sets the endpoint's zone.
func Zone(z string) EndpointOption { return func(e *discovery.Endpoint) { e.Zone = ptr.To(z) } }

// Hostname sets the endpoint's hostname.
func Hostname(h string) EndpointOption { return func(e *discovery.Endpoint) { e.Hostname = ptr.To(h) } }

// ZoneHints sets hints.forZones.
func ZoneHints(zones ...string) EndpointOption {
	return func(e *discovery.Endpoint) {
		if e.Hints == nil {
			e.Hints = &discovery.EndpointHints{}
		}
		for _, z := range zones {
			e.Hints.ForZones = append(e.Hints.ForZones, discovery.ForZone{Name: z})
		}
	}
}

// NodeHints sets hints.forNodes.
func NodeHints(nodes ...string) EndpointOption {
	return func(e *discovery.Endpoint) {
		if e.Hints == nil {
			e.Hints = &discovery.EndpointHints{}
		}
		for _, n := range nodes {
			e.Hints.ForNodes = append(e.Hints.ForNodes, discovery.ForNode{Name: n})
		}
	}
}

// BenchService is the i-th service of the benchmarks' clusters:
// bench/svc-NNNNN, a ClusterIP in 10.96.0.0/12 that i picks, port http
// 80/TCP.
func BenchService(i int) *v1.Service {
	return Service("bench", fmt.Sprintf("svc-%05d", i),
		fmt.Sprintf("10.%d.%d.%d", 96+(i>>16), (i>>8)&255, i&255), Port("http", v1.ProtocolTCP, 80, 0))
}

// BenchSlice is the EndpointSlice of BenchService(i): ten endpoints, one
// on each of node-0 … node-9, port http 8080/TCP. The first is not ready
// unless firstReady, so that benchmarks can flip one endpoint.
func BenchSlice(i int, firstReady bool) *discovery.EndpointSlice {
	name := fmt.Sprintf("svc-%05d", i)
	opts := []SliceOption{SlicePort("http", v1.ProtocolTCP, 8080)}
	for j := range 10 {
		var eo []EndpointOption
		if j == 0 && !firstReady {
			eo = append(eo, NotReady())
		}
		opts = append(opts, Endpoint(fmt.Sprintf("10.%d.%d.%d", 128+j, (i>>8)&255, i&255), fmt.Sprintf("node-%d", j), eo...))
	}
	return Slice("bench", name, name+"-abc", opts...)
}
