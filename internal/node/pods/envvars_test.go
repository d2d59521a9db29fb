package pods

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func svc(ns, name, ip string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func TestServiceEnv(t *testing.T) {
	services := []*corev1.Service{
		svc("default", "hostnames", "10.96.3.27", corev1.ServicePort{Name: "default", Port: 80, Protocol: corev1.ProtocolTCP}),
		svc("default", "kubernetes", "10.96.0.1", corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}),
		svc("default", "headless", "None", corev1.ServicePort{Port: 80, Protocol: corev1.ProtocolTCP}),
		svc("other", "elsewhere", "10.96.9.9", corev1.ServicePort{Port: 80, Protocol: corev1.ProtocolTCP}),
		svc("default", "dns-ish", "10.96.0.10",
			corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
			corev1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP}),
	}
	env := map[string]string{}
	for _, e := range ServiceEnv("default", services, true) {
		env[e.Name] = e.Value
	}
	want := map[string]string{
		"HOSTNAMES_SERVICE_HOST":         "10.96.3.27",
		"HOSTNAMES_SERVICE_PORT":         "80",
		"HOSTNAMES_SERVICE_PORT_DEFAULT": "80",
		"HOSTNAMES_PORT":                 "tcp://10.96.3.27:80",
		"HOSTNAMES_PORT_80_TCP":          "tcp://10.96.3.27:80",
		"HOSTNAMES_PORT_80_TCP_PROTO":    "tcp",
		"HOSTNAMES_PORT_80_TCP_PORT":     "80",
		"HOSTNAMES_PORT_80_TCP_ADDR":     "10.96.3.27",
		"KUBERNETES_SERVICE_HOST":        "10.96.0.1",
		"KUBERNETES_SERVICE_PORT":        "443",
		"KUBERNETES_SERVICE_PORT_HTTPS":  "443",
		"KUBERNETES_PORT":                "tcp://10.96.0.1:443",
		"DNS_ISH_PORT":                   "udp://10.96.0.10:53",
		"DNS_ISH_PORT_53_UDP_PROTO":      "udp",
		"DNS_ISH_PORT_53_TCP":            "tcp://10.96.0.10:53",
		"DNS_ISH_SERVICE_PORT_DNS_TCP":   "53",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	for _, absent := range []string{"HEADLESS_SERVICE_HOST", "ELSEWHERE_SERVICE_HOST"} {
		if _, ok := env[absent]; ok {
			t.Errorf("%s set", absent)
		}
	}
	// enableServiceLinks: false keeps only the API server's.
	off := ServiceEnv("default", services, false)
	for _, e := range off {
		if e.Name == "HOSTNAMES_SERVICE_HOST" {
			t.Error("service links with enableServiceLinks false")
		}
	}
	if len(off) == 0 {
		t.Error("KUBERNETES_SERVICE_* missing with enableServiceLinks false")
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "x", "EMPTY": ""}
	for in, want := range map[string]string{
		"plain":         "plain",
		"$(A)":          "x",
		"pre-$(A)-$(A)": "pre-x-x",
		"$$(A)":         "$(A)",
		"$(MISSING)":    "$(MISSING)",
		"$(EMPTY)!":     "!",
		"$(unclosed":    "$(unclosed",
		"cost $5":       "cost $5",
		"trailing $":    "trailing $",
	} {
		if got := Expand(in, vars); got != want {
			t.Errorf("Expand(%q) = %q, want %q", in, got, want)
		}
	}
}
