package networking

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	. "github.com/svcnet/svcnet/internal/registry/registrytest"
)

func serviceBackend(name string, port int32) networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name,
		Port: networkingv1.ServiceBackendPort{Number: port}}}
}

func ingress(mutate func(*networkingv1.Ingress)) *networkingv1.Ingress {
	return Mutated(&networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To("nginx"),
			Rules: []networkingv1.IngressRule{{
				Host: "web.example.com",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: serviceBackend("web", 80)}},
				}},
			}},
		},
	}, mutate)
}

func TestIngressValidate(t *testing.T) {
	const path0 = "spec.rules[0].http.paths[0]."
	setPath := func(typ networkingv1.PathType, p string) func(*networkingv1.Ingress) {
		return func(ing *networkingv1.Ingress) {
			hp := &ing.Spec.Rules[0].HTTP.Paths[0]
			hp.Path = p
			if typ != "" {
				hp.PathType = &typ
			} else {
				hp.PathType = nil
			}
		}
	}
	setBackend := func(b networkingv1.IngressBackend) func(*networkingv1.Ingress) {
		return func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths[0].Backend = b }
	}
	cases := []struct {
		name   string
		mutate func(*networkingv1.Ingress)
		want   []string
	}{
		{"one rule", nil, nil},
		{"default backend only", func(ing *networkingv1.Ingress) {
			ing.Spec.Rules = nil
			ing.Spec.DefaultBackend = ptr.To(serviceBackend("web", 80))
		}, nil},
		{"neither rules nor default backend", func(ing *networkingv1.Ingress) { ing.Spec.Rules = nil }, []string{Inv("spec")}},
		{"invalid default backend", func(ing *networkingv1.Ingress) {
			ing.Spec.DefaultBackend = ptr.To(serviceBackend("web", 70000))
		}, []string{Inv("spec.defaultBackend.service.port.number")}},
		{"no class", func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = nil }, nil},
		{"bad class name", func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = ptr.To("Nginx_") },
			[]string{Inv("spec.ingressClassName")}},
		{"any host", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "" }, nil},
		{"wildcard host", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "*.example.com" }, nil},
		{"wildcard in the middle", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "web.*.com" },
			[]string{Inv("spec.rules[0].host")}},
		{"upper-case host", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "Web.example.com" },
			[]string{Inv("spec.rules[0].host")}},
		{"rule without http", func(ing *networkingv1.Ingress) {
			ing.Spec.Rules[0].HTTP = nil
			ing.Spec.DefaultBackend = ptr.To(serviceBackend("web", 80))
		}, nil},
		{"http without paths", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths = nil },
			[]string{Req("spec.rules[0].http.paths")}},
		{"exact path", setPath(networkingv1.PathTypeExact, "/login"), nil},
		{"implementation-specific regular expression", setPath(networkingv1.PathTypeImplementationSpecific, "/api/.*"), nil},
		{"implementation-specific, no path", setPath(networkingv1.PathTypeImplementationSpecific, ""), nil},
		{"implementation-specific double slash", setPath(networkingv1.PathTypeImplementationSpecific, "/a//b"), nil},
		{"no path type", setPath("", "/"), []string{Req(path0 + "pathType")}},
		{"unknown path type", setPath("Regex", "/"), []string{Unsup(path0 + "pathType")}},
		{"relative prefix", setPath(networkingv1.PathTypePrefix, "api"), []string{Inv(path0 + "path")}},
		{"relative implementation-specific path", setPath(networkingv1.PathTypeImplementationSpecific, "api"), []string{Inv(path0 + "path")}},
		{"double slash", setPath(networkingv1.PathTypePrefix, "/a//b"), []string{Inv(path0 + "path")}},
		{"dot segment", setPath(networkingv1.PathTypeExact, "/a/../b"), []string{Inv(path0 + "path")}},
		{"encoded slash", setPath(networkingv1.PathTypePrefix, "/a%2Fb"), []string{Inv(path0 + "path")}},
		{"two bad sequences", setPath(networkingv1.PathTypePrefix, "/a//b/./c"), []string{Inv(path0 + "path"), Inv(path0 + "path")}},
		{"named service port", setBackend(networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web",
			Port: networkingv1.ServiceBackendPort{Name: "http"}}}), nil},
		{"bad service port name", setBackend(networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web",
			Port: networkingv1.ServiceBackendPort{Name: "http_alt"}}}), []string{Inv(path0 + "backend.service.port.name")}},
		{"service port out of range", setBackend(serviceBackend("web", 65536)), []string{Inv(path0 + "backend.service.port.number")}},
		{"no service name", setBackend(serviceBackend("", 80)), []string{Req(path0 + "backend.service.name")}},
		{"bad service name", setBackend(serviceBackend("web.svc", 80)), []string{Inv(path0 + "backend.service.name")}},
		{"resource backend", setBackend(networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{
			APIGroup: ptr.To("k8s.example.com"), Kind: "StorageBucket", Name: "static"}}), nil},
		{"service and resource", setBackend(networkingv1.IngressBackend{Service: serviceBackend("web", 80).Service,
			Resource: &corev1.TypedLocalObjectReference{Kind: "StorageBucket", Name: "static"}}), []string{Inv(path0 + "backend")}},
		{"no backend", setBackend(networkingv1.IngressBackend{}), []string{Inv(path0 + "backend")}},
		{"TLS", func(ing *networkingv1.Ingress) {
			ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"web.example.com", "*.example.com"}, SecretName: "web-tls"}}
		}, nil},
		{"bad TLS host", func(ing *networkingv1.Ingress) {
			ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"web.example.com", "-web.example.com"}}}
		}, []string{Inv("spec.tls[0].hosts[1]")}},
		{"bad name", func(ing *networkingv1.Ingress) { ing.Name = "web/1" }, []string{Inv("metadata.name")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ing := ingress(tc.mutate)
			CheckErrors(t, ValidateCreate(Ingress, ing), tc.want...)
			// An update is held to the same rules (Ingresses have no
			// immutable fields).
			CheckErrors(t, ValidateUpdate(Ingress, ing, ingress(nil)), tc.want...)
		})
	}
}

func TestIngressStatusAndGeneration(t *testing.T) {
	lb := networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}}}
	cases := []struct {
		name       string
		status     bool // through the status subresource
		mutate     func(*networkingv1.Ingress)
		wantGen    int64
		wantHost   string
		wantStatus bool // status.loadBalancer set after the update
	}{
		{"spec", false, func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "www.example.com" }, 2, "www.example.com", false},
		{"status on the main resource", false, func(ing *networkingv1.Ingress) { ing.Status.LoadBalancer = lb }, 1, "web.example.com", false},
		{"annotations", false, func(ing *networkingv1.Ingress) { ing.Annotations = map[string]string{"a": "b"} }, 1, "web.example.com", false},
		{"status subresource", true, func(ing *networkingv1.Ingress) { ing.Status.LoadBalancer = lb }, 1, "web.example.com", true},
		{"spec through the status subresource", true, func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "www.example.com" },
			1, "web.example.com", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := ingress(func(ing *networkingv1.Ingress) { ing.Status.LoadBalancer = lb })
			Create(t, InNamespace("default"), Ingress, old)
			if old.Generation != 1 || len(old.Status.LoadBalancer.Ingress) != 0 {
				t.Fatalf("created with generation %d and status %+v", old.Generation, old.Status)
			}
			old.ResourceVersion = "4"
			obj := old.DeepCopy()
			tc.mutate(obj)
			Update(t, InNamespace("default"), Ingress, tc.status, obj, old)
			if obj.Generation != tc.wantGen || obj.Spec.Rules[0].Host != tc.wantHost || (len(obj.Status.LoadBalancer.Ingress) > 0) != tc.wantStatus {
				t.Errorf("generation %d, host %q, status %+v", obj.Generation, obj.Spec.Rules[0].Host, obj.Status)
			}
		})
	}
}

func TestIngressTable(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*networkingv1.Ingress)
		want   []any // class, hosts, address, ports
	}{
		{"one host", nil, []any{"nginx", "web.example.com", "", "80"}},
		{"no class, any host", func(ing *networkingv1.Ingress) {
			ing.Spec.IngressClassName = nil
			ing.Spec.Rules[0].Host = ""
		}, []any{"<none>", "*", "", "80"}},
		{"two hosts with TLS", func(ing *networkingv1.Ingress) {
			ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: "api.example.com"})
			ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"web.example.com"}}}
		}, []any{"nginx", "web.example.com,api.example.com", "", "80, 443"}},
		{"load balanced", func(ing *networkingv1.Ingress) {
			ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}, {Hostname: "lb.example.com"}}
		}, []any{"nginx", "web.example.com", "192.0.2.10,lb.example.com", "80"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ing := ingress(tc.mutate)
			ing.CreationTimestamp = TwoDaysAgo()
			cols, cells := TableOf(t, Ingress, ing)
			if want := []string{"Name", "Class", "Hosts", "Address", "Ports", "Age"}; !slices.Equal(cols, want) {
				t.Errorf("columns %q, want %q", cols, want)
			}
			if want := append(append([]any{"web"}, tc.want...), "2d"); !slices.Equal(cells, want) {
				t.Errorf("row %q, want %q", cells, want)
			}
		})
	}
}

func ingressClass(mutate func(*networkingv1.IngressClass)) *networkingv1.IngressClass {
	return Mutated(&networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx"},
		Spec:       networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"},
	}, mutate)
}

func TestIngressClassValidate(t *testing.T) {
	RunCreate(t, IngressClass, ingressClass, []Case[*networkingv1.IngressClass]{
		{"nginx", nil, nil},
		{"with parameters", func(ic *networkingv1.IngressClass) {
			ic.Spec.Parameters = &networkingv1.IngressClassParametersReference{Kind: "IngressParameters", Name: "external-lb"}
		}, nil},
		{"no controller", func(ic *networkingv1.IngressClass) { ic.Spec.Controller = "" }, []string{Req("spec.controller")}},
		{"controller without a domain", func(ic *networkingv1.IngressClass) { ic.Spec.Controller = "nginx" }, []string{Inv("spec.controller")}},
		{"bad name", func(ic *networkingv1.IngressClass) { ic.Name = "Nginx" }, []string{Inv("metadata.name")}},
		{"namespaced", func(ic *networkingv1.IngressClass) { ic.Namespace = "default" }, []string{Forbid("metadata.namespace")}},
	})
}

func TestIngressClassValidateUpdate(t *testing.T) {
	RunUpdate(t, IngressClass, ingressClass, []Case[*networkingv1.IngressClass]{
		{"parameters", func(ic *networkingv1.IngressClass) {
			ic.Spec.Parameters = &networkingv1.IngressClassParametersReference{Kind: "IngressParameters", Name: "external-lb"}
		}, nil},
		{"default class annotation", func(ic *networkingv1.IngressClass) {
			ic.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}
		}, nil},
		{"controller", func(ic *networkingv1.IngressClass) { ic.Spec.Controller = "example.com/other" }, []string{Inv("spec.controller")}},
	})
}

func TestIngressClassTable(t *testing.T) {
	cases := []struct {
		name   string
		params *networkingv1.IngressClassParametersReference
		want   string
	}{
		{"no parameters", nil, "<none>"},
		{"core parameters", &networkingv1.IngressClassParametersReference{Kind: "ConfigMap", Name: "nginx-config"}, "ConfigMap/nginx-config"},
		{"parameters of a group", &networkingv1.IngressClassParametersReference{APIGroup: ptr.To("k8s.example.com"),
			Kind: "IngressParameters", Name: "external-lb"}, "IngressParameters.k8s.example.com/external-lb"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ic := ingressClass(func(ic *networkingv1.IngressClass) { ic.Spec.Parameters = tc.params })
			ic.CreationTimestamp = TwoDaysAgo()
			cols, cells := TableOf(t, IngressClass, ic)
			if want := []string{"Name", "Controller", "Parameters", "Age"}; !slices.Equal(cols, want) {
				t.Errorf("columns %q, want %q", cols, want)
			}
			if want := []any{"nginx", "k8s.io/ingress-nginx", tc.want, "2d"}; !slices.Equal(cells, want) {
				t.Errorf("row %q, want %q", cells, want)
			}
		})
	}
}
