package route

import (
	networkingv1 "k8s.io/api/networking/v1"
)

// Annotations that select classes, with Kubernetes' names.
const (
	// ClassAnnotation is the deprecated way to name an Ingress's class.
	ClassAnnotation = "kubernetes.io/ingress.class"
	// DefaultClassAnnotation marks the IngressClass used by Ingresses that
	// name none.
	DefaultClassAnnotation = "ingressclass.kubernetes.io/is-default-class"
)

// Classes decides which Ingresses this controller serves.
type Classes struct {
	// Controller is the spec.controller of the IngressClasses that are
	// ours (svcnet.dev/ingress).
	Controller string
	// Name is the class name the deprecated annotation must carry.
	Name string
	// ByName holds the cluster's IngressClasses.
	ByName map[string]*networkingv1.IngressClass
}

// Serves reports whether ing belongs to this controller: its
// spec.ingressClassName names an IngressClass of ours; else its
// kubernetes.io/ingress.class annotation is our class name; else (no class
// at all) the cluster's default IngressClass is ours.
func (c Classes) Serves(ing *networkingv1.Ingress) bool {
	if n := ing.Spec.IngressClassName; n != nil {
		cl := c.ByName[*n]
		return cl != nil && cl.Spec.Controller == c.Controller
	}
	if a, ok := ing.Annotations[ClassAnnotation]; ok {
		return a == c.Name
	}
	d := c.Default()
	return d != nil && d.Spec.Controller == c.Controller
}

// Default is the default IngressClass: of those annotated as default, the
// newest, as the API server's DefaultIngressClass admission picks it (ties
// by name); nil when there is none.
func (c Classes) Default() *networkingv1.IngressClass {
	var best *networkingv1.IngressClass
	for _, cl := range c.ByName {
		if cl.Annotations[DefaultClassAnnotation] != "true" {
			continue
		}
		if best == nil || best.CreationTimestamp.Before(&cl.CreationTimestamp) ||
			(best.CreationTimestamp.Equal(&cl.CreationTimestamp) && cl.Name > best.Name) {
			best = cl
		}
	}
	return best
}
