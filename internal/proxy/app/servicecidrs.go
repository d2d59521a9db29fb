package app

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// serviceCIDRWait bounds the first sync's wait for the ServiceCIDR list.
const serviceCIDRWait = 5 * time.Second

// serviceCIDRSetter is a proxier that drops traffic to the unallocated
// addresses of the service ranges (the nftables mode).
type serviceCIDRSetter interface {
	SetServiceCIDRs([]netip.Prefix) bool
}

// servesServiceCIDRs says whether the API server serves ServiceCIDR
// objects (networking.k8s.io/v1, Kubernetes 1.33 and later; svcnet's).
func servesServiceCIDRs(client kubernetes.Interface) bool {
	list, err := client.Discovery().ServerResourcesForGroupVersion(networkingv1.SchemeGroupVersion.String())
	if err != nil {
		return false
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "servicecidrs" })
}

// watchServiceCIDRs keeps the setters' service ranges those of the
// cluster's ServiceCIDR objects (every range of every object, as
// kube-proxy gathers them), and calls changed when they changed. It
// returns what says the first list has been handed over.
func watchServiceCIDRs(ctx context.Context, client kubernetes.Interface, setters []serviceCIDRSetter, changed func(),
	logger *slog.Logger) (cache.InformerSynced, func(), error) {
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Networking().V1().ServiceCIDRs().Informer()
	update := func() {
		var cidrs []netip.Prefix
		for _, obj := range inf.GetStore().List() {
			sc, ok := obj.(*networkingv1.ServiceCIDR)
			if !ok {
				continue
			}
			for _, s := range sc.Spec.CIDRs {
				p, err := netip.ParsePrefix(s)
				if err != nil {
					logger.Warn("ignoring a ServiceCIDR's range", "serviceCIDR", sc.Name, "cidr", s, "err", err)
					continue
				}
				cidrs = append(cidrs, p)
			}
		}
		moved := false
		for _, s := range setters {
			if s.SetServiceCIDRs(cidrs) {
				moved = true
			}
		}
		if moved {
			logger.Info("service ranges changed", "serviceCIDRs", cidrs)
			changed()
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { update() },
		UpdateFunc: func(any, any) { update() },
		DeleteFunc: func(any) { update() },
	})
	if err != nil {
		return nil, nil, err
	}
	factory.Start(ctx.Done())
	return reg.HasSynced, factory.Shutdown, nil
}
