package controller

import (
	"cmp"
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/svcstate"
)

// Addresses is what every served Ingress's status.loadBalancer.ingress
// says, from the --publish-service Service: its load-balancer ingress,
// else its external IPs, else the addresses of the nodes its ready pods
// run on (ExternalIP, else InternalIP), as ingress-nginx reports them.
func Addresses(svc *corev1.Service, eps []svcstate.Endpoint, nodes map[string]*corev1.Node) []networkingv1.IngressLoadBalancerIngress {
	var out []networkingv1.IngressLoadBalancerIngress
	if svc == nil {
		return nil
	}
	for _, lb := range svc.Status.LoadBalancer.Ingress {
		if lb.IP != "" || lb.Hostname != "" {
			out = append(out, networkingv1.IngressLoadBalancerIngress{IP: lb.IP, Hostname: lb.Hostname})
		}
	}
	if len(out) == 0 {
		for _, ip := range svc.Spec.ExternalIPs {
			out = append(out, networkingv1.IngressLoadBalancerIngress{IP: ip})
		}
	}
	if len(out) == 0 {
		seen := map[string]bool{}
		for _, e := range svcstate.Usable(eps) {
			if n := nodes[e.NodeName]; n != nil && !seen[n.Name] {
				seen[n.Name] = true
				if ip := nodeAddress(n); ip != "" {
					out = append(out, networkingv1.IngressLoadBalancerIngress{IP: ip})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b networkingv1.IngressLoadBalancerIngress) int {
		// Addresses first, then names.
		return cmp.Or(cmp.Compare(isName(a), isName(b)), cmp.Compare(a.IP, b.IP), cmp.Compare(a.Hostname, b.Hostname))
	})
	return slices.CompactFunc(out, func(a, b networkingv1.IngressLoadBalancerIngress) bool {
		return a.IP == b.IP && a.Hostname == b.Hostname
	})
}

func isName(a networkingv1.IngressLoadBalancerIngress) int {
	if a.IP == "" {
		return 1
	}
	return 0
}

func nodeAddress(n *corev1.Node) string {
	for _, t := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
		for _, a := range n.Status.Addresses {
			if a.Type == t && a.Address != "" {
				return a.Address
			}
		}
	}
	return ""
}

// sameAddresses compares load-balancer ingress lists by address only.
func sameAddresses(a, b []networkingv1.IngressLoadBalancerIngress) bool {
	return slices.EqualFunc(a, b, func(x, y networkingv1.IngressLoadBalancerIngress) bool {
		return x.IP == y.IP && x.Hostname == y.Hostname
	})
}

// runStatus writes the status of served Ingresses whenever the served set
// or the publish Service's addresses change, off the sync loop: API
// writes may be slow and must never delay routing.
func (c *Controller) runStatus(ctx context.Context) {
	owned := map[types.NamespacedName][]networkingv1.IngressLoadBalancerIngress{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.statusKick:
		}
		if !c.syncStatus(ctx, owned) {
			// A conflict or an API error: try again in a moment.
			time.AfterFunc(time.Second, func() { kick(c.statusKick) })
		}
	}
}

func (c *Controller) syncStatus(ctx context.Context, owned map[types.NamespacedName][]networkingv1.IngressLoadBalancerIngress) bool {
	pub := c.cfg.PublishService
	svc, _ := c.services.Services(pub.Namespace).Get(pub.Name)
	var eps []svcstate.Endpoint
	if s := c.tracker.Current().Service(pub); s != nil {
		for _, p := range s.EndpointPorts() {
			eps = append(eps, s.Endpoints(p)...)
		}
	}
	nodes := map[string]*corev1.Node{}
	if all, err := c.nodes.List(labels.Everything()); err == nil {
		for _, n := range all {
			nodes[n.Name] = n
		}
	}
	want := Addresses(svc, eps, nodes)
	served := c.servedSet()
	ok := true
	ings, _ := c.ingresses.List(labels.Everything())
	for _, ing := range ings {
		nn := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		var target []networkingv1.IngressLoadBalancerIngress
		switch {
		case served[nn]:
			target = want
		case owned[nn] != nil && sameAddresses(ing.Status.LoadBalancer.Ingress, owned[nn]):
			// It left the class: take back what we wrote, and only that.
			target = nil
		default:
			delete(owned, nn)
			continue
		}
		if sameAddresses(ing.Status.LoadBalancer.Ingress, target) {
			if served[nn] {
				owned[nn] = target
			} else {
				delete(owned, nn)
			}
			continue
		}
		cp := ing.DeepCopy()
		cp.Status.LoadBalancer.Ingress = target
		if _, err := c.client.NetworkingV1().Ingresses(ing.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil {
			c.cfg.Logger.Warn("ingress status not updated", "ingress", nn.String(), "err", err)
			ok = false
			continue
		}
		if served[nn] {
			owned[nn] = target
		} else {
			delete(owned, nn)
		}
	}
	return ok
}
