package apiserver

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	networkinglisters "k8s.io/client-go/listers/networking/v1"

	"github.com/svcnet/svcnet/internal/ingress/route"
)

// defaultIngressClass is kube-apiserver's DefaultIngressClass admission:
// an Ingress created with no class (neither spec.ingressClassName nor the
// deprecated kubernetes.io/ingress.class annotation) gets the default
// IngressClass's name, so that it stays with that class when the default
// changes later. With several defaults the newest wins, as in Kubernetes
// 1.30 and later; with none the Ingress is left without a class.
type defaultIngressClass struct {
	*admission.Handler
	lister networkinglisters.IngressClassLister
}

var _ admission.MutationInterface = (*defaultIngressClass)(nil)

func newDefaultIngressClass(f informers.SharedInformerFactory) *defaultIngressClass {
	inf := f.Networking().V1().IngressClasses()
	p := &defaultIngressClass{Handler: admission.NewHandler(admission.Create), lister: inf.Lister()}
	p.SetReadyFunc(inf.Informer().HasSynced)
	return p
}

// Admit implements admission.MutationInterface.
func (p *defaultIngressClass) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != networkingv1.Resource("ingresses") || a.GetSubresource() != "" {
		return nil
	}
	ing, ok := a.GetObject().(*networkingv1.Ingress)
	if !ok {
		return nil
	}
	if ing.Spec.IngressClassName != nil {
		return nil
	}
	if _, ok := ing.Annotations[route.ClassAnnotation]; ok {
		return nil
	}
	if !p.WaitForReady() {
		return admission.NewForbidden(a, fmt.Errorf("not yet ready to handle request"))
	}
	classes, err := p.lister.List(labels.Everything())
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("list IngressClasses: %w", err))
	}
	byName := make(map[string]*networkingv1.IngressClass, len(classes))
	for _, c := range classes {
		byName[c.Name] = c
	}
	if d := (route.Classes{ByName: byName}).Default(); d != nil {
		name := d.Name
		ing.Spec.IngressClassName = &name
	}
	return nil
}
