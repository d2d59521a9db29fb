package servicelb

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func lbService(name, want string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerIP: want}}
}

func TestParsePool(t *testing.T) {
	cases := []struct {
		spec string
		want string
		ok   bool
	}{
		{"10.0.0.1-10.0.0.3", "10.0.0.1-10.0.0.3", true},
		{"192.168.5.0/30", "192.168.5.1-192.168.5.2", true},
		{"10.0.0.9", "10.0.0.9-10.0.0.9", true},
		{"10.0.0.5-10.0.0.1", "", false},
		{"10.0.0.1-fd00::1", "", false},
		{"", "", false},
		{"banana", "", false},
	}
	for _, c := range cases {
		p, err := ParsePool(c.spec)
		if (err == nil) != c.ok || (err == nil && p.String() != c.want) {
			t.Errorf("ParsePool(%q) = %v, %v", c.spec, p, err)
		}
	}
}

func TestPoolAllocation(t *testing.T) {
	ctx := context.Background()
	p, _ := ParsePool("10.0.0.1-10.0.0.2")
	ip := func(s *corev1.Service) (string, error) {
		ing, err := p.Ensure(ctx, s, nil)
		if err != nil {
			return "", err
		}
		return ing[0].IP, nil
	}
	if got, _ := ip(lbService("a", "10.0.0.2")); got != "10.0.0.2" {
		t.Errorf("requested: %s", got)
	}
	if got, _ := ip(lbService("b", "")); got != "10.0.0.1" {
		t.Errorf("next free: %s", got)
	}
	if got, _ := ip(lbService("b", "")); got != "10.0.0.1" {
		t.Errorf("stable: %s", got)
	}
	if _, err := ip(lbService("c", "")); err == nil || !strings.Contains(err.Error(), "no free address") {
		t.Errorf("full pool: %v", err)
	}
	if _, err := ip(lbService("c", "10.0.0.2")); err == nil || !strings.Contains(err.Error(), "already used by default/a") {
		t.Errorf("taken: %v", err)
	}
	if _, err := ip(lbService("c", "10.9.9.9")); err == nil || !strings.Contains(err.Error(), "not in the pool") {
		t.Errorf("outside: %v", err)
	}
	_ = p.Delete(ctx, lbService("a", ""))
	if got, _ := ip(lbService("c", "")); got != "10.0.0.2" {
		t.Errorf("after release: %s", got)
	}
	// A restarted pool learns what the services have.
	q, _ := ParsePool("10.0.0.1-10.0.0.2")
	s := lbService("b", "")
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.0.0.1"}}
	q.Restore(s)
	if ing, _ := q.Ensure(ctx, lbService("new", ""), nil); ing[0].IP != "10.0.0.2" {
		t.Errorf("restored pool gave %s", ing[0].IP)
	}
}
