// Package dnstest holds what the DNS packages' tests share: fixture
// Services, EndpointSlices and Pods, and a fake upstream DNS server on
// loopback. It is imported by tests only.
package dnstest

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Service returns a ClusterIP Service (dual-stack with two IPs; not yet
// allocated with none).
func Service(ns, name string, clusterIPs []string, ports ...corev1.ServicePort) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeClusterIP,
			ClusterIPs: clusterIPs,
			Ports:      ports,
		},
	}
	if len(clusterIPs) > 0 {
		s.Spec.ClusterIP = clusterIPs[0]
	}
	return s
}

// Headless returns a Service with clusterIP None.
func Headless(ns, name string, publishNotReady bool, ports ...corev1.ServicePort) *corev1.Service {
	s := Service(ns, name, []string{corev1.ClusterIPNone}, ports...)
	s.Spec.PublishNotReadyAddresses = publishNotReady
	return s
}

// ExternalName returns an ExternalName Service.
func ExternalName(ns, name, target string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: target},
	}
}

// Port is a Service port.
func Port(name string, proto corev1.Protocol, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: port}
}

// Endpoint is one endpoint of a fixture slice.
type Endpoint struct {
	IP       string
	Hostname string
	NotReady bool
}

// Slice returns an EndpointSlice of service with the given named ports.
func Slice(ns, service, name string, family discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...Endpoint) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: service},
		},
		AddressType: family,
		Ports:       ports,
	}
	for _, e := range eps {
		ep := discoveryv1.Endpoint{
			Addresses:  []string{e.IP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(!e.NotReady)},
		}
		if e.Hostname != "" {
			ep.Hostname = ptr.To(e.Hostname)
		}
		sl.Endpoints = append(sl.Endpoints, ep)
	}
	return sl
}

// SlicePort is an EndpointSlice port.
func SlicePort(name string, proto corev1.Protocol, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr.To(name), Protocol: ptr.To(proto), Port: ptr.To(port)}
}

// Pod returns a running pod with the cluster's DNS policy.
func Pod(ns, name string, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{DNSPolicy: corev1.DNSClusterFirst},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	return p
}

// Cluster is the fixture snapshot the DNS tests answer from.
type Cluster struct {
	Services []*corev1.Service
	Slices   []*discoveryv1.EndpointSlice
	Pods     []*corev1.Pod
}

// Addresses the fixtures use, so tests name them instead of repeating them.
const (
	ClientIP      = "10.244.5.5" // default/client
	OtherClientIP = "10.244.5.6" // other/client2
	HostNetIP     = "192.168.1.10"
)

// Fixture returns the shared snapshot: one object of each shape the
// specification covers, plus the edge cases.
func Fixture() Cluster {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	hostNet := Pod("default", "hostnet", HostNetIP)
	hostNet.Spec.HostNetwork = true
	done := Pod("default", "done", "10.244.5.7")
	done.Status.Phase = corev1.PodSucceeded
	custom := Pod("default", "custom-dns", "10.244.5.8")
	custom.Spec.DNSPolicy = corev1.DNSNone
	clash1 := Pod("default", "clash-a", "10.244.5.9")
	clash2 := Pod("other", "clash-b", "10.244.5.9")

	return Cluster{
		Services: []*corev1.Service{
			Service("default", "kubernetes", []string{"10.96.0.1"}, Port("https", tcp, 443)),
			Service("default", "hostnames", []string{"10.96.0.27"}, Port("http", tcp, 80), Port("", tcp, 8080)),
			Service("default", "dual", []string{"10.96.0.30", "fd00::30"}, Port("dns", udp, 53), Port("dns-tcp", tcp, 53)),
			Service("default", "pending", nil, Port("http", tcp, 80)),
			Headless("default", "web", false, Port("http", tcp, 80)),
			Headless("default", "web6", false),
			Headless("default", "empty", false),
			Headless("default", "warming", true),
			ExternalName("default", "ext", "hostnames.example.com"),
			ExternalName("default", "ext-internal", "Kubernetes.Default.svc.cluster.local."),
			ExternalName("default", "ext-missing", "nope.default.svc.cluster.local"),
			ExternalName("default", "ext-loop", "ext-loop.default.svc.cluster.local"),
			Service("other", "db", []string{"10.96.1.5"}, Port("postgres", tcp, 5432)),
		},
		Slices: []*discoveryv1.EndpointSlice{
			Slice("default", "web", "web-a", discoveryv1.AddressTypeIPv4,
				[]discoveryv1.EndpointPort{SlicePort("http", tcp, 8080)},
				Endpoint{IP: "10.244.0.1", Hostname: "web-0"},
				Endpoint{IP: "10.244.0.2"},
				Endpoint{IP: "10.244.0.3", NotReady: true}),
			// A second slice repeating one endpoint, as the controller does
			// while it moves endpoints between slices.
			Slice("default", "web", "web-b", discoveryv1.AddressTypeIPv4,
				[]discoveryv1.EndpointPort{SlicePort("http", tcp, 8080)},
				Endpoint{IP: "10.244.0.2"},
				Endpoint{IP: "10.244.0.4", Hostname: "web-2"}),
			Slice("default", "web6", "web6-a", discoveryv1.AddressTypeIPv6, nil,
				Endpoint{IP: "fd00:10::5", Hostname: "v6pod"}),
			Slice("default", "warming", "warming-a", discoveryv1.AddressTypeIPv4, nil,
				Endpoint{IP: "10.244.1.1", NotReady: true}),
			Slice("default", "empty", "empty-a", discoveryv1.AddressTypeIPv4, nil,
				Endpoint{IP: "10.244.1.9", NotReady: true}),
			// A slice whose Service does not exist publishes nothing.
			Slice("default", "ghost", "ghost-a", discoveryv1.AddressTypeIPv4, nil,
				Endpoint{IP: "10.244.1.10"}),
		},
		Pods: []*corev1.Pod{
			Pod("default", "client", ClientIP),
			Pod("other", "client2", OtherClientIP, "fd00:10::6"),
			Pod("default", "web-0", "10.244.0.1"),
			hostNet, done, custom, clash1, clash2,
		},
	}
}
