package edge

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRules(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{
			{Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}, {Port: 53, NodePort: 30053, Protocol: corev1.ProtocolUDP}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "172.18.255.200"}}}}}
	pending := svc.DeepCopy()
	pending.Name = "pending"
	pending.Status = corev1.ServiceStatus{}
	nodes := []netip.Addr{netip.MustParseAddr("172.18.0.11"), netip.MustParseAddr("172.18.0.12"), netip.MustParseAddr("172.18.0.13")}
	fs := Frontends([]*corev1.Service{svc, pending}, func(*corev1.Service) []netip.Addr { return nodes })
	if len(fs) != 2 {
		t.Fatalf("frontends %+v", fs)
	}
	r := Rules(fs)
	for _, want := range []string{
		"-d 172.18.255.200/32 -p tcp -m tcp --dport 80 -m statistic --mode random --probability 0.3333333333 -j DNAT --to-destination 172.18.0.11:30080",
		"--probability 0.5000000000 -j DNAT --to-destination 172.18.0.12:30080",
		"--dport 80 -j DNAT --to-destination 172.18.0.13:30080",
		"-p udp -m udp --dport 53",
		"--ctstate DNAT",
	} {
		if !strings.Contains(r, want) {
			t.Errorf("rules lack %q:\n%s", want, r)
		}
	}
	empty := Rules(Frontends([]*corev1.Service{svc}, func(*corev1.Service) []netip.Addr { return nil }))
	if !strings.Contains(empty, "-j REJECT") || strings.Contains(empty, "DNAT --to") {
		t.Errorf("no backends:\n%s", empty)
	}
}
