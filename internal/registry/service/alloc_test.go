package service

import (
	"context"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func newAlloc(t *testing.T, existing ...corev1.Service) *Allocators {
	t.Helper()
	a, err := NewAllocators("10.96.0.0/24", "30000-30009")
	if err != nil {
		t.Fatal(err)
	}
	a.List = func(context.Context) ([]corev1.Service, error) { return existing, nil }
	return a
}

func TestRepairMarksStoredValues(t *testing.T) {
	stored := *svc(func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.10", []string{"10.96.0.10"}
		s.Spec.Ports[0].NodePort = 30005
	})
	a := newAlloc(t, stored)
	dup := svc(func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.10" })
	if _, err := a.allocate(context.Background(), dup, nil, false); err == nil {
		t.Fatal("allocated a cluster IP that a stored service holds")
	}
	dupPort := svc(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort; s.Spec.Ports[0].NodePort = 30005 })
	if _, err := a.allocate(context.Background(), dupPort, nil, false); err == nil {
		t.Fatal("allocated a node port that a stored service holds")
	}
}

func TestAllocateByType(t *testing.T) {
	cases := []struct {
		name           string
		mutate         func(*corev1.Service)
		ip, nodePorts  bool
		healthCheck    bool
		wantFamilyNone bool
	}{
		{"ClusterIP", nil, true, false, false, false},
		{"headless", func(s *corev1.Service) { s.Spec.ClusterIP = "None" }, false, false, false, false},
		{"NodePort", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }, true, true, false, false},
		{"LoadBalancer", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }, true, true, false, false},
		{"LoadBalancer Local", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}, true, true, true, false},
		{"LoadBalancer without node ports", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
		}, true, false, false, false},
		{"ExternalName", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.com"
		}, false, false, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newAlloc(t)
			s := svc(c.mutate)
			if _, err := a.allocate(context.Background(), s, nil, false); err != nil {
				t.Fatal(err)
			}
			ip, err := netip.ParseAddr(s.Spec.ClusterIP)
			if c.ip != (err == nil && a.IPs.HasIP(ip)) {
				t.Errorf("cluster IP %q allocated: want %v", s.Spec.ClusterIP, c.ip)
			}
			if c.nodePorts != (s.Spec.Ports[0].NodePort != 0) {
				t.Errorf("node port %d: want allocated %v", s.Spec.Ports[0].NodePort, c.nodePorts)
			}
			if c.healthCheck != (s.Spec.HealthCheckNodePort != 0) {
				t.Errorf("health check port %d: want %v", s.Spec.HealthCheckNodePort, c.healthCheck)
			}
			if c.wantFamilyNone != (len(s.Spec.IPFamilies) == 0) {
				t.Errorf("ipFamilies %v", s.Spec.IPFamilies)
			}
			a.Release(context.Background(), s)
			if free := a.Ports.Free(); free != 10 {
				t.Errorf("after release %d ports free, want 10", free)
			}
		})
	}
}

func TestSharedNodePortAcrossProtocols(t *testing.T) {
	a := newAlloc(t)
	s := svc(func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.Ports = []corev1.ServicePort{{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP}, {Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP}}
	})
	if _, err := a.allocate(context.Background(), s, nil, false); err != nil {
		t.Fatal(err)
	}
	if s.Spec.Ports[0].NodePort == 0 || s.Spec.Ports[0].NodePort != s.Spec.Ports[1].NodePort {
		t.Errorf("node ports %d %d, want one shared", s.Spec.Ports[0].NodePort, s.Spec.Ports[1].NodePort)
	}
	if a.Ports.Free() != 9 {
		t.Errorf("%d free, want 9", a.Ports.Free())
	}
}

// An update that leaves allocated values out (kubectl apply, replace)
// keeps them; a type change drops what the new type does not use.
func TestKeepAllocatedOnUpdate(t *testing.T) {
	a := newAlloc(t)
	old := svc(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	if _, err := a.allocate(context.Background(), old, nil, false); err != nil {
		t.Fatal(err)
	}

	replaced := svc(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	keepAllocated(replaced, old)
	if replaced.Spec.ClusterIP != old.Spec.ClusterIP || replaced.Spec.Ports[0].NodePort != old.Spec.Ports[0].NodePort {
		t.Errorf("replace lost allocations: %+v", replaced.Spec)
	}
	if len(released(replaced, old)) != 0 {
		t.Errorf("replace releases %v", released(replaced, old))
	}

	toClusterIP := old.DeepCopy()
	toClusterIP.Spec.Type = corev1.ServiceTypeClusterIP
	toClusterIP.Spec.ExternalTrafficPolicy = ""
	keepAllocated(toClusterIP, old)
	if toClusterIP.Spec.Ports[0].NodePort != 0 {
		t.Errorf("node port kept on ClusterIP")
	}
	rel := released(toClusterIP, old)
	if len(rel) != 1 || rel[0].port != int(old.Spec.Ports[0].NodePort) {
		t.Errorf("released %v, want the node port", rel)
	}

	old.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	toExternal := old.DeepCopy()
	toExternal.Spec.Type = corev1.ServiceTypeExternalName
	toExternal.Spec.ExternalName = "example.com"
	keepAllocated(toExternal, old)
	if toExternal.Spec.ClusterIP != "" || len(toExternal.Spec.IPFamilies) != 0 || toExternal.Spec.Ports[0].NodePort != 0 ||
		toExternal.Spec.ExternalTrafficPolicy != "" {
		t.Errorf("ExternalName keeps %+v", toExternal.Spec)
	}
	if len(released(toExternal, old)) != 2 {
		t.Errorf("released %v, want IP and port", released(toExternal, old))
	}
	back := toExternal.DeepCopy()
	back.Spec.Type = corev1.ServiceTypeClusterIP
	keepAllocated(back, toExternal)
	if back.Spec.ExternalName != "" {
		t.Errorf("ExternalName made ClusterIP keeps externalName %q", back.Spec.ExternalName)
	}
}

// A failed request gives back what it took.
func TestRollback(t *testing.T) {
	stored := *svc(func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.ClusterIP = "10.96.0.50"
		s.Spec.Ports[0].NodePort = 30002
	})
	a := newAlloc(t, stored)
	s := svc(func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.Ports = []corev1.ServicePort{{Name: "a", Port: 80, NodePort: 30001}, {Name: "b", Port: 81, NodePort: 30002}}
	})
	if _, err := a.allocate(context.Background(), s, nil, false); err == nil {
		t.Fatal("node port of a stored service allocated")
	}
	if a.Ports.Free() != 9 || a.IPs.Free() != a.IPs.Size()-1 {
		t.Errorf("rollback left ports %d/9 IPs %d/%d free", a.Ports.Free(), a.IPs.Free(), a.IPs.Size()-1)
	}
}
