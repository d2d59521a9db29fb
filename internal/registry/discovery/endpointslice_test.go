package discovery

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/apis"
	"github.com/svcnet/svcnet/internal/registry"

	. "github.com/svcnet/svcnet/internal/registry/registrytest"
)

func slice(mutate func(*discoveryv1.EndpointSlice)) *discoveryv1.EndpointSlice {
	s := Mutated(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abc12", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.1.0.5"}, Hostname: ptr.To("web-0"), NodeName: ptr.To("node-1"),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.1.0.6"}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
	}, mutate)
	apis.Scheme.Default(s)
	return s
}

func TestEndpointSliceDefaults(t *testing.T) {
	s := slice(func(s *discoveryv1.EndpointSlice) { s.Ports = []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}} })
	if p := s.Ports[0]; p.Name == nil || *p.Name != "" || p.Protocol == nil || *p.Protocol != corev1.ProtocolTCP {
		t.Errorf("defaulted port %+v", p)
	}
}

func TestEndpointSliceValidate(t *testing.T) {
	const addr0 = "endpoints[0].addresses[0]: Invalid value"
	addresses := func(n int) []string {
		var a []string
		for i := range n {
			a = append(a, fmt.Sprintf("10.2.%d.%d", i/256, i%256))
		}
		return a
	}
	RunCreate(t, EndpointSlice, slice, []Case[*discoveryv1.EndpointSlice]{
		{"IPv4 slice", nil, nil},
		{"IPv6 slice", func(s *discoveryv1.EndpointSlice) {
			s.AddressType = discoveryv1.AddressTypeIPv6
			s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"fd00::5"}}}
		}, nil},
		{"FQDN slice", func(s *discoveryv1.EndpointSlice) {
			s.AddressType = discoveryv1.AddressTypeFQDN
			s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"db.example.com"}}}
		}, nil},
		{"no endpoints", func(s *discoveryv1.EndpointSlice) { s.Endpoints = nil }, nil},
		{"all ports", func(s *discoveryv1.EndpointSlice) { s.Ports = []discoveryv1.EndpointPort{{}} }, nil},
		{"unknown address type", func(s *discoveryv1.EndpointSlice) { s.AddressType = "IP" }, []string{"addressType: Unsupported value"}},
		{"IPv6 address in an IPv4 slice", func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses[0] = "fd00::5" }, []string{addr0}},
		{"IPv4 address in an IPv6 slice", func(s *discoveryv1.EndpointSlice) {
			s.AddressType = discoveryv1.AddressTypeIPv6
			s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.5"}}}
		}, []string{addr0}},
		{"not an address", func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses[0] = "10.1.0.256" }, []string{addr0}},
		{"not a fully qualified name", func(s *discoveryv1.EndpointSlice) {
			s.AddressType = discoveryv1.AddressTypeFQDN
			s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"localhost"}}}
		}, []string{addr0}},
		{"endpoint without addresses", func(s *discoveryv1.EndpointSlice) { s.Endpoints[1].Addresses = nil },
			[]string{"endpoints[1].addresses"}},
		{"endpoint with 101 addresses", func(s *discoveryv1.EndpointSlice) { s.Endpoints[1].Addresses = addresses(101) },
			[]string{"endpoints[1].addresses"}},
		{"1001 endpoints", func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = nil
			for _, a := range addresses(1001) {
				s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
			}
		}, []string{"endpoints: Too many"}},
		{"bad hostname", func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Hostname = ptr.To("web.0") },
			[]string{"endpoints[0].hostname: Invalid value"}},
		{"bad node name", func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].NodeName = ptr.To("Node_1") },
			[]string{"endpoints[0].nodeName: Invalid value"}},
		{"bad port name", func(s *discoveryv1.EndpointSlice) { s.Ports[0].Name = ptr.To("HTTP") },
			[]string{"ports[0].name: Invalid value"}},
		{"duplicate port names", func(s *discoveryv1.EndpointSlice) {
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To("http"), Port: ptr.To[int32](8443)})
		}, []string{"ports[1].name: Duplicate value"}},
		{"two unnamed ports", func(s *discoveryv1.EndpointSlice) {
			s.Ports = []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}, {Port: ptr.To[int32](443)}}
		}, []string{"ports[1].name: Duplicate value"}},
		{"same name, two protocols", func(s *discoveryv1.EndpointSlice) {
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To("dns"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolUDP)})
		}, nil},
		{"unknown protocol", func(s *discoveryv1.EndpointSlice) { s.Ports[0].Protocol = ptr.To[corev1.Protocol]("ICMP") },
			[]string{"ports[0].protocol: Unsupported value"}},
		{"port zero", func(s *discoveryv1.EndpointSlice) { s.Ports[0].Port = ptr.To[int32](0) }, []string{"ports[0].port: Invalid value"}},
		{"port too high", func(s *discoveryv1.EndpointSlice) { s.Ports[0].Port = ptr.To[int32](65536) }, []string{"ports[0].port: Invalid value"}},
		{"101 ports", func(s *discoveryv1.EndpointSlice) {
			s.Ports = nil
			for i := range 101 {
				s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To(fmt.Sprintf("p%d", i)), Port: ptr.To(int32(1000 + i))})
			}
		}, []string{"ports: Too many"}},
		{"bad name", func(s *discoveryv1.EndpointSlice) { s.Name = "Web" }, []string{"metadata.name: Invalid value"}},
	})
}

func TestEndpointSliceUpdate(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*discoveryv1.EndpointSlice)
		wantGen int64
		want    []string
	}{
		{"endpoint added", func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.1.0.7"}})
		}, 2, nil},
		{"endpoint not ready", func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Conditions.Ready = ptr.To(false) }, 2, nil},
		{"port changed", func(s *discoveryv1.EndpointSlice) { s.Ports[0].Port = ptr.To[int32](9090) }, 2, nil},
		{"labels changed", func(s *discoveryv1.EndpointSlice) {
			s.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
		}, 1, nil},
		{"client-chosen generation", func(s *discoveryv1.EndpointSlice) { s.Generation = 30 }, 1, nil},
		{"address type changed", func(s *discoveryv1.EndpointSlice) {
			s.AddressType = discoveryv1.AddressTypeIPv6
			s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"fd00::5"}}}
		}, 2, []string{"addressType: Invalid value"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			strategy := registry.NewStrategy(EndpointSlice)
			old := slice(nil)
			old.Generation = 12 // clients cannot choose it
			Create(t, InNamespace("default"), EndpointSlice, old)
			if old.Generation != 1 {
				t.Errorf("generation %d after create, want 1", old.Generation)
			}
			old.ResourceVersion = "3"
			obj := old.DeepCopy()
			tc.mutate(obj)
			err := rest.BeforeUpdate(strategy, InNamespace("default"), obj, old)
			if tc.want != nil {
				if err == nil {
					t.Fatal("update accepted")
				}
				CheckErrors(t, strategy.ValidateUpdate(InNamespace("default"), obj, old), tc.want...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if obj.Generation != tc.wantGen {
				t.Errorf("generation %d, want %d", obj.Generation, tc.wantGen)
			}
		})
	}
}

func TestEndpointSliceTable(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*discoveryv1.EndpointSlice)
		ports  string
		eps    string
	}{
		{"two endpoints", nil, "8080", "10.1.0.5,10.1.0.6"},
		{"empty", func(s *discoveryv1.EndpointSlice) { s.Endpoints, s.Ports = nil, nil }, "<unset>", "<unset>"},
		{"many", func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1", "10.1.0.2"}}, {Addresses: []string{"10.1.0.3"}},
				{Addresses: []string{"10.1.0.4"}}, {Addresses: []string{"10.1.0.5"}}}
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To("https"), Port: ptr.To[int32](8443)})
		}, "8080,8443", "10.1.0.1,10.1.0.2,10.1.0.3 + 2 more..."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := slice(tc.mutate)
			s.CreationTimestamp = TwoDaysAgo()
			cols, row := TableOf(t, EndpointSlice, s)
			CheckRow(t, cols, row, []string{"Name", "AddressType", "Ports", "Endpoints", "Age"},
				[]any{"web-abc12", "IPv4", tc.ports, tc.eps, "2d"})
		})
	}
}
