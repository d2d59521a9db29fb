package route

import (
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func class(name, controller string, age int, isDefault bool) *networkingv1.IngressClass {
	c := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))},
		Spec:       networkingv1.IngressClassSpec{Controller: controller},
	}
	if isDefault {
		c.Annotations = map[string]string{DefaultClassAnnotation: "true"}
	}
	return c
}

func TestClasses(t *testing.T) {
	const ours, theirs = "svcnet.dev/ingress", "k8s.io/ingress-nginx"
	withClass := func(n string) *networkingv1.Ingress {
		i := ing("a", 0)
		i.Spec.IngressClassName = ptr.To(n)
		return i
	}
	withAnnotation := func(v string) *networkingv1.Ingress {
		i := ing("a", 0)
		i.Annotations = map[string]string{ClassAnnotation: v}
		return i
	}
	tests := []struct {
		name    string
		classes []*networkingv1.IngressClass
		ing     *networkingv1.Ingress
		want    bool
	}{
		{"class of ours", []*networkingv1.IngressClass{class("svcnet", ours, 0, false)}, withClass("svcnet"), true},
		{"class of ours under another name", []*networkingv1.IngressClass{class("edge", ours, 0, false)}, withClass("edge"), true},
		{"class of another controller", []*networkingv1.IngressClass{class("nginx", theirs, 0, false)}, withClass("nginx"), false},
		{"class that does not exist", nil, withClass("svcnet"), false},
		{"annotation with our name", nil, withAnnotation("svcnet"), true},
		{"annotation with another name", []*networkingv1.IngressClass{class("svcnet", ours, 0, true)}, withAnnotation("nginx"), false},
		{"class name beats the annotation", []*networkingv1.IngressClass{class("nginx", theirs, 0, false)},
			func() *networkingv1.Ingress {
				i := withClass("nginx")
				i.Annotations = map[string]string{ClassAnnotation: "svcnet"}
				return i
			}(), false},
		{"no class, ours is default", []*networkingv1.IngressClass{class("svcnet", ours, 0, true)}, ing("a", 0), true},
		{"no class, no default", []*networkingv1.IngressClass{class("svcnet", ours, 0, false)}, ing("a", 0), false},
		{"no class, another is default", []*networkingv1.IngressClass{class("svcnet", ours, 0, false), class("nginx", theirs, 0, true)}, ing("a", 0), false},
		{"no class, the newest default is ours", []*networkingv1.IngressClass{class("svcnet", ours, 2, true), class("nginx", theirs, 1, true)}, ing("a", 0), true},
		{"no class, the newest default is theirs", []*networkingv1.IngressClass{class("svcnet", ours, 1, true), class("nginx", theirs, 2, true)}, ing("a", 0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Classes{Controller: ours, Name: "svcnet", ByName: map[string]*networkingv1.IngressClass{}}
			for _, cl := range tt.classes {
				c.ByName[cl.Name] = cl
			}
			if got := c.Serves(tt.ing); got != tt.want {
				t.Errorf("Serves = %v, want %v", got, tt.want)
			}
		})
	}
}
