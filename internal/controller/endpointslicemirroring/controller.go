//lint:file-ignore SA1019 mirroring reads the v1 Endpoints API, deprecated in Kubernetes 1.33 but still served

// Package endpointslicemirroring mirrors hand-written Endpoints of Services
// without a selector into EndpointSlices, as kube-controller-manager's
// EndpointSliceMirroring controller does, so that proxies and DNS, which
// read only EndpointSlices, see them.
package endpointslicemirroring

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/endpointslice"
)

// ManagedBy marks mirrored slices.
const ManagedBy = "endpointslicemirroring-controller.k8s.io"

// Controller is the mirroring controller.
type Controller struct {
	client    kubernetes.Interface
	services  corelisters.ServiceLister
	endpoints corelisters.EndpointsLister
	slices    discoverylisters.EndpointSliceLister
	queue     *controller.Queue
	max       int
	written   *endpointslice.Tracker
}

// New wires the controller to factory's informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, maxPerSlice int) *Controller {
	c := &Controller{
		client:    client,
		services:  factory.Core().V1().Services().Lister(),
		endpoints: factory.Core().V1().Endpoints().Lister(),
		slices:    factory.Discovery().V1().EndpointSlices().Lister(),
		max:       maxPerSlice,
		written:   endpointslice.NewTracker(),
	}
	c.queue = controller.NewQueue("endpointslicemirroring", c.sync)
	handlers := c.queue.Handler()
	_, _ = factory.Core().V1().Services().Informer().AddEventHandler(handlers)
	_, _ = factory.Core().V1().Endpoints().Informer().AddEventHandler(handlers)
	_, _ = factory.Discovery().V1().EndpointSlices().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, o any) { c.enqueueSlice(o) }, DeleteFunc: c.enqueueSlice,
	})
	return c
}

func (c *Controller) enqueueSlice(obj any) {
	if s, ok := controller.As[*discoveryv1.EndpointSlice](obj); ok && s.Labels[discoveryv1.LabelManagedBy] == ManagedBy {
		c.queue.Add(s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName])
	}
}

// Run syncs until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) { c.queue.Run(ctx, workers) }

func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	existing, err := c.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ManagedBy}))
	if err != nil {
		return 0, err
	}
	if c.written.Stale(key, existing) {
		return 100 * time.Millisecond, nil
	}
	svc, svcErr := c.services.Services(ns).Get(name)
	ep, epErr := c.endpoints.Endpoints(ns).Get(name)
	mirror := svcErr == nil && epErr == nil && svc.Spec.Selector == nil && svc.Spec.Type != corev1.ServiceTypeExternalName &&
		ep.Labels[discoveryv1.LabelSkipMirror] != "true"
	if !mirror {
		for _, s := range existing {
			if err := c.client.DiscoveryV1().EndpointSlices(ns).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return 0, err
			}
			c.written.Record(key, s.Name, -1)
		}
		return 0, nil
	}
	labelsOut := map[string]string{}
	for k, v := range ep.Labels {
		labelsOut[k] = v
	}
	plan := endpointslice.Reconcile(endpointslice.Input{
		Service: svc, Desired: fromEndpoints(ep), Existing: existing, MaxPerSlice: c.max,
		ManagedBy: ManagedBy, Labels: labelsOut,
		Owner: &metav1.OwnerReference{APIVersion: "v1", Kind: "Endpoints", Name: ep.Name, UID: ep.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
	})
	for _, s := range plan.Delete {
		if err := c.client.DiscoveryV1().EndpointSlices(ns).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return 0, err
		}
		c.written.Record(key, s.Name, -1)
	}
	for _, s := range plan.Update {
		out, err := c.client.DiscoveryV1().EndpointSlices(ns).Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return 0, fmt.Errorf("mirror %s: %w", key, err)
		}
		c.written.Record(key, out.Name, out.Generation)
	}
	for _, s := range plan.Create {
		out, err := c.client.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			return 0, fmt.Errorf("mirror %s: %w", key, err)
		}
		c.written.Record(key, out.Name, out.Generation)
	}
	return 0, nil
}

// fromEndpoints turns each subset's addresses into desired endpoints.
func fromEndpoints(ep *corev1.Endpoints) []endpointslice.Desired {
	var out []endpointslice.Desired
	for _, ss := range ep.Subsets {
		ports := make([]discoveryv1.EndpointPort, 0, len(ss.Ports))
		for _, p := range ss.Ports {
			ports = append(ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(p.Port), Protocol: ptr.To(p.Protocol), AppProtocol: p.AppProtocol})
		}
		add := func(a corev1.EndpointAddress, ready bool) {
			ip, err := netip.ParseAddr(a.IP)
			if err != nil {
				return
			}
			t := discoveryv1.AddressTypeIPv4
			if ip.Is6() && !ip.Is4In6() {
				t = discoveryv1.AddressTypeIPv6
			}
			e := discoveryv1.Endpoint{Addresses: []string{ip.Unmap().String()}, NodeName: a.NodeName, TargetRef: a.TargetRef,
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(ready), Terminating: ptr.To(false)}}
			if a.Hostname != "" {
				e.Hostname = ptr.To(a.Hostname)
			}
			out = append(out, endpointslice.Desired{AddressType: t, Ports: ports, Endpoint: e})
		}
		for _, a := range ss.Addresses {
			add(a, true)
		}
		for _, a := range ss.NotReadyAddresses {
			add(a, false)
		}
	}
	return out
}
