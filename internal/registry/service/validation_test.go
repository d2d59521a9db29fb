package service

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/apis"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func svc(mutate func(*corev1.Service)) *corev1.Service {
	s := registrytest.Mutated(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "my-service", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "MyApp"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt(9376)}}},
	}, mutate)
	apis.DefaultService(s)
	return s
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*corev1.Service)
		errs   []string // fields that must be reported; none = valid
	}{
		{"reference example", nil, nil},
		{"named target port", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("http") }, nil},
		{"bad name", func(s *corev1.Service) { s.Name = "a_b" }, []string{"metadata.name"}},
		{"ends with a dash", func(s *corev1.Service) { s.Name = "abc-" }, []string{"metadata.name"}},
		{"longer than a label", func(s *corev1.Service) { s.Name = strings.Repeat("a", 64) }, []string{"metadata.name"}},
		// RelaxedServiceNameValidation, GA and locked on since Kubernetes 1.37.
		{"starts with a digit (DNS-1123 label)", func(s *corev1.Service) { s.Name = "9lives" }, nil},
		{"no ports", func(s *corev1.Service) { s.Spec.Ports = nil }, []string{"spec.ports"}},
		{"headless without ports", func(s *corev1.Service) { s.Spec.Ports = nil; s.Spec.ClusterIP = "None" }, nil},
		{"port out of range", func(s *corev1.Service) { s.Spec.Ports[0].Port = 70000 }, []string{"spec.ports[0].port"}},
		{"bad protocol", func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "ICMP" }, []string{"spec.ports[0].protocol"}},
		{"duplicate port", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, s.Spec.Ports[0])
			s.Spec.Ports[0].Name, s.Spec.Ports[1].Name = "a", "b"
		}, []string{"spec.ports[1]"}},
		{"same port two protocols", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "udp", Port: 80, Protocol: corev1.ProtocolUDP})
			s.Spec.Ports[0].Name = "tcp"
		}, nil},
		{"unnamed ports", func(s *corev1.Service) { s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: 81}) }, []string{"spec.ports[0].name", "spec.ports[1].name"}},
		{"duplicate names", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "x", Port: 81})
			s.Spec.Ports[0].Name = "x"
		}, []string{"spec.ports[1].name"}},
		{"bad target port name", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("no_underscores") }, []string{"spec.ports[0].targetPort"}},
		{"bad type", func(s *corev1.Service) { s.Spec.Type = "Magic" }, []string{"spec.type"}},
		{"external name needs name", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName }, []string{"spec.externalName"}},
		{"external name", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.ExternalName = "hostnames.example.com"
			s.Spec.InternalTrafficPolicy = nil
		}, nil},
		{"external name with cluster IP", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.ExternalName = "hostnames.example.com"
			s.Spec.ClusterIP = "10.0.0.1"
		}, []string{"spec.clusterIP"}},
		{"bad cluster IP", func(s *corev1.Service) { s.Spec.ClusterIP = "10.0.0.300" }, []string{"spec.clusterIPs[0]"}},
		{"headless NodePort", func(s *corev1.Service) { s.Spec.ClusterIP = "None"; s.Spec.Type = corev1.ServiceTypeNodePort }, []string{"spec.clusterIPs[0]"}},
		{"node port on ClusterIP", func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30001 }, []string{"spec.ports[0].nodePort"}},
		{"node port", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort; s.Spec.Ports[0].NodePort = 8477 }, nil},
		{"affinity timeout too long", func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](86401)}}
		}, []string{"spec.sessionAffinityConfig.clientIP.timeoutSeconds"}},
		{"ETP on ClusterIP", func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }, []string{"spec.externalTrafficPolicy"}},
		{"source ranges on NodePort", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"}
		}, []string{"spec.loadBalancerSourceRanges"}},
		{"bad source range", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/99"}
		}, []string{"spec.loadBalancerSourceRanges[0]"}},
		{"bad external IP", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"127.0.0.1"} }, []string{"spec.externalIPs[0]"}},
		{"health check port without Local", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.HealthCheckNodePort = 30000
		}, []string{"spec.healthCheckNodePort"}},
		{"bad selector", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"a b": "c"} }, []string{"spec.selector"}},
		{"dual stack families duplicated", func(s *corev1.Service) {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv4Protocol}
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
		}, []string{"spec.ipFamilies[1]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := Validate(svc(c.mutate))
			if len(c.errs) == 0 {
				if len(errs) > 0 {
					t.Fatalf("unexpected errors: %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) == 0 {
				t.Fatalf("no error, want errors on %v", c.errs)
			}
			for _, f := range c.errs {
				found := false
				for _, e := range errs {
					if e.Field == f {
						found = true
					}
				}
				if !found {
					t.Errorf("no error on %s in %v", f, errs.ToAggregate())
				}
			}
		})
	}
}

func TestValidateUpdateClusterIPImmutable(t *testing.T) {
	old := svc(func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.20"; s.Spec.ClusterIPs = []string{"10.96.0.20"} })
	changed := old.DeepCopy()
	changed.Spec.ClusterIP, changed.Spec.ClusterIPs = "10.96.0.21", []string{"10.96.0.21"}
	if errs := ValidateUpdate(changed, old); len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "may not change once set") {
		t.Errorf("cluster IP change: %v", errs)
	}
	toExternal := old.DeepCopy()
	toExternal.Spec.Type = corev1.ServiceTypeExternalName
	toExternal.Spec.ClusterIP, toExternal.Spec.ClusterIPs = "", nil
	if errs := ValidateUpdate(toExternal, old); len(errs) != 0 {
		t.Errorf("change to ExternalName: %v", errs)
	}
}
