package controller

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/svcstate"
)

func TestAddresses(t *testing.T) {
	node := func(name string, addrs ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for i := 0; i+1 < len(addrs); i += 2 {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeAddressType(addrs[i]), Address: addrs[i+1]})
		}
		return n
	}
	nodes := map[string]*corev1.Node{
		"n1": node("n1", "InternalIP", "10.0.0.1"),
		"n2": node("n2", "InternalIP", "10.0.0.2", "ExternalIP", "203.0.113.2"),
	}
	ep := func(node string, ready bool) svcstate.Endpoint {
		return svcstate.Endpoint{IP: netip.MustParseAddr("10.244.0.9"), Port: 80, NodeName: node, Ready: ready, Serving: ready}
	}
	withLB := &corev1.Service{Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
		{IP: "192.0.2.20"}, {Hostname: "lb.example"}, {IP: "192.0.2.10"}}}}}
	withExternal := &corev1.Service{Spec: corev1.ServiceSpec{ExternalIPs: []string{"198.51.100.1"}}}
	plain := &corev1.Service{}
	tests := []struct {
		name string
		svc  *corev1.Service
		eps  []svcstate.Endpoint
		want []string
	}{
		{"no service", nil, nil, nil},
		{"load balancer, sorted", withLB, nil, []string{"192.0.2.10", "192.0.2.20", "lb.example"}},
		{"external IPs", withExternal, []svcstate.Endpoint{ep("n1", true)}, []string{"198.51.100.1"}},
		{"nodes of ready pods, external address first", plain,
			[]svcstate.Endpoint{ep("n1", true), ep("n2", true), ep("n2", true), ep("n3", true)}, []string{"10.0.0.1", "203.0.113.2"}},
		{"not-ready pods do not count", plain, []svcstate.Endpoint{ep("n1", false), ep("n2", true)}, []string{"203.0.113.2"}},
		{"nothing", plain, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, a := range Addresses(tt.svc, tt.eps, nodes) {
				got = append(got, a.IP+a.Hostname)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("%v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("%v, want %v", got, tt.want)
				}
			}
		})
	}
	if !sameAddresses([]networkingv1.IngressLoadBalancerIngress{{IP: "a"}}, []networkingv1.IngressLoadBalancerIngress{{IP: "a", Ports: []networkingv1.IngressPortStatus{{Port: 80}}}}) {
		t.Error("ports should not matter")
	}
}
