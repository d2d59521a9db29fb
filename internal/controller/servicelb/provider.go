// Package servicelb gives Services of type LoadBalancer their load
// balancer, as the cloud-provider service controller does: it asks a
// Provider for one, writes its addresses to status.loadBalancer.ingress,
// and releases it (guarded by a finalizer) when the Service is deleted or
// stops being a LoadBalancer. Providers are pluggable; see pool.go for the
// one the local cluster uses.
package servicelb

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// Provider makes load balancers.
type Provider interface {
	// Name identifies the provider in events.
	Name() string
	// Ensure creates or updates the load balancer of svc in front of
	// nodes and returns its addresses.
	Ensure(ctx context.Context, svc *corev1.Service, nodes []*corev1.Node) ([]corev1.LoadBalancerIngress, error)
	// Delete releases the load balancer of svc; releasing none is fine.
	Delete(ctx context.Context, svc *corev1.Service) error
}

// Restorer is a Provider that learns, at start, the load balancers that
// already exist (from the Services' status).
type Restorer interface {
	Restore(svc *corev1.Service)
}

// Finalizer guards the release of a load balancer, with Kubernetes' name.
const Finalizer = "service.kubernetes.io/load-balancer-cleanup"
