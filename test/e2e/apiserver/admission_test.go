package apiserver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

// TestDefaultIngressClass: as kube-apiserver's DefaultIngressClass
// admission, an Ingress created with no class gets the default
// IngressClass (the newest of several); one naming a class by field or
// by the deprecated annotation keeps it, and updates are left alone.
func TestDefaultIngressClass(t *testing.T) {
	s := framework.StartAPIServer(t) // its own: the default class is chosen among all the cluster's IngressClasses
	c := s.Client()
	ctx := framework.Context(t, 2*time.Minute)
	ings := c.NetworkingV1().Ingresses("default")
	n := 0
	create := func(mutate func(*networkingv1.Ingress)) *networkingv1.Ingress {
		t.Helper()
		n++
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ing-%d", n)},
			Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}
		if mutate != nil {
			mutate(ing)
		}
		out, err := ings.Create(ctx, ing, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	class := func(ing *networkingv1.Ingress) string {
		if ing.Spec.IngressClassName == nil {
			return "<none>"
		}
		return *ing.Spec.IngressClassName
	}
	newClass := func(name string, isDefault bool) {
		t.Helper()
		ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressClassSpec{Controller: "svcnet.dev/ingress"}}
		if isDefault {
			ic.Annotations = map[string]string{"ingressclass.kubernetes.io/is-default-class": "true"}
		}
		if _, err := c.NetworkingV1().IngressClasses().Create(ctx, ic, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// waitDefault creates Ingresses without a class until one gets want:
	// the admission reads IngressClasses from an informer, a moment behind.
	waitDefault := func(want string) {
		t.Helper()
		start := time.Now()
		eventually(t, "new Ingresses to get class "+want, func(context.Context) bool { return class(create(nil)) == want })
		t.Logf("default class %s in effect after %s", want, time.Since(start))
	}

	newClass("plain", false)
	first := create(nil)
	if class(first) != "<none>" {
		t.Errorf("with no default IngressClass an Ingress got class %s", class(first))
	}
	newClass("a", true)
	waitDefault("a")
	for _, tc := range []struct {
		name   string
		mutate func(*networkingv1.Ingress)
		want   string
	}{
		{"explicit class", func(i *networkingv1.Ingress) { i.Spec.IngressClassName = ptr.To("plain") }, "plain"},
		{"deprecated annotation", func(i *networkingv1.Ingress) {
			i.Annotations = map[string]string{"kubernetes.io/ingress.class": "nginx"}
		}, "<none>"},
	} {
		if got := class(create(tc.mutate)); got != tc.want {
			t.Errorf("%s: class %s, want %s", tc.name, got, tc.want)
		}
	}
	// Two defaults: the newest (here by name, created in the same second).
	newClass("b", true)
	waitDefault("b")
	// An update is not a create: the class-less Ingress stays so.
	first.Labels = map[string]string{"touched": "yes"}
	up, err := ings.Update(ctx, first, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if class(up) != "<none>" {
		t.Errorf("an update of a class-less Ingress gave it class %s", class(up))
	}
}
