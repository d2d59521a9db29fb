//lint:file-ignore SA1019 svcnet serves the v1 Endpoints API, deprecated in Kubernetes 1.33 but still served there too

package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/networking"
)

// bootstrapNamespaces exist from the start, as in every Kubernetes cluster.
var bootstrapNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// bootstrap creates what a new cluster has: its namespaces and the
// default/kubernetes Service that points at the API server.
type bootstrap struct {
	serviceIP   netip.Addr // first address of the service range
	serviceCIDR string     // the service range, the default ServiceCIDR's
	advertise   string     // address in the kubernetes endpoints ("" = none)
	port        int
}

// ensureHook is a post-start hook that writes with ensure, through a
// client of the server's own, retrying until ensure succeeds or two
// minutes pass: the server may still be warming up and refuse writes.
// notYet is logged with each failure.
func ensureHook(notYet string, ensure func(context.Context, kubernetes.Interface) error) genericapiserver.PostStartHookFunc {
	return func(hookCtx genericapiserver.PostStartHookContext) error {
		client, err := kubernetes.NewForConfig(hookCtx.LoopbackClientConfig)
		if err != nil {
			return err
		}
		return wait.PollUntilContextTimeout(hookCtx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			if err := ensure(ctx, client); err != nil {
				slog.Debug(notYet, "err", err)
				return false, nil
			}
			return true, nil
		})
	}
}

func (b *bootstrap) ensure(ctx context.Context, client kubernetes.Interface) error {
	for _, name := range bootstrapNamespaces {
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: b.serviceIP.String(),
			Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromInt(b.port)}},
			SessionAffinity: corev1.ServiceAffinityNone,
			Type:            corev1.ServiceTypeClusterIP,
		},
	}
	// Look first: a create of an existing service would fail on its
	// already-allocated IP before it failed on its name.
	if _, err := client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		_, err = client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create service default/kubernetes: %w", err)
		}
	} else if err != nil {
		return err
	}
	return b.ensureServiceCIDR(ctx, client)
}

// ensureServiceCIDR keeps the default ServiceCIDR, the API server's
// service range, Ready, as kube-apiserver's default-servicecidr
// controller does.
func (b *bootstrap) ensureServiceCIDR(ctx context.Context, client kubernetes.Interface) error {
	if b.serviceCIDR == "" {
		return nil
	}
	api := client.NetworkingV1().ServiceCIDRs()
	sc, err := api.Get(ctx, networking.DefaultServiceCIDR, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		sc, err = api.Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: networking.DefaultServiceCIDR},
			Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{b.serviceCIDR}}}, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("default ServiceCIDR: %w", err)
	}
	if meta.IsStatusConditionTrue(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady) {
		return nil
	}
	meta.SetStatusCondition(&sc.Status.Conditions, metav1.Condition{Type: networkingv1.ServiceCIDRConditionReady,
		Status: metav1.ConditionTrue, Reason: "Ready", Message: "Kubernetes default Service CIDR is ready"})
	if _, err := api.UpdateStatus(ctx, sc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("default ServiceCIDR status: %w", err)
	}
	return nil
}

// ensureEndpoints points default/kubernetes at the live API servers'
// addresses, both as Endpoints and as an EndpointSlice, as kube-apiserver
// does; unchanged objects are not written.
func (b *bootstrap) ensureEndpoints(ctx context.Context, client kubernetes.Interface, ips []string) error {
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}},
	}
	if len(ips) > 0 {
		subset := corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Name: "https", Port: int32(b.port), Protocol: corev1.ProtocolTCP}}}
		for _, ip := range ips {
			subset.Addresses = append(subset.Addresses, corev1.EndpointAddress{IP: ip})
		}
		ep.Subsets = []corev1.EndpointSubset{subset}
	}
	if cur, err := client.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{}); err == nil {
		if !apiequality.Semantic.DeepEqual(cur.Subsets, ep.Subsets) || cur.Labels[discoveryv1.LabelSkipMirror] != "true" {
			ep.ResourceVersion = cur.ResourceVersion
			if _, err := client.CoreV1().Endpoints("default").Update(ctx, ep, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	} else if _, err := client.CoreV1().Endpoints("default").Create(ctx, ep, metav1.CreateOptions{}); err != nil {
		return err
	}
	addrType := discoveryv1.AddressTypeIPv4
	if a, err := netip.ParseAddr(b.advertise); err == nil && a.Is6() {
		addrType = discoveryv1.AddressTypeIPv6
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes", discoveryv1.LabelManagedBy: "kube-apiserver"}},
		AddressType: addrType,
		Endpoints:   []discoveryv1.Endpoint{},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(b.port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, ip := range ips {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	if cur, err := client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{}); err == nil {
		if apiequality.Semantic.DeepEqual(cur.Endpoints, slice.Endpoints) && apiequality.Semantic.DeepEqual(cur.Ports, slice.Ports) {
			return nil
		}
		slice.ResourceVersion = cur.ResourceVersion
		_, err = client.DiscoveryV1().EndpointSlices("default").Update(ctx, slice, metav1.UpdateOptions{})
		return err
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	_, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{})
	return err
}
