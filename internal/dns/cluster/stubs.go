package cluster

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/dns/forward"
)

// The keys kube-dns reads from its ConfigMap (kube-system/kube-dns).
const (
	keyStubDomains         = "stubDomains"
	keyUpstreamNameservers = "upstreamNameservers"
	// maxUpstreamNameservers is kube-dns's limit.
	maxUpstreamNameservers = 3
)

// routes are where outside names go with the ConfigMap cm (nil: none):
// the flags' upstreams and stub domains, then cm's upstreamNameservers
// in place of the upstreams and its stubDomains beside the flags' ones,
// as kube-dns reads them. A bad ConfigMap is an error naming the key.
func (c *config) routes(cm *corev1.ConfigMap) (forward.Routes, error) {
	r := forward.Routes{Zones: maps.Clone(c.stubs)}
	if !c.noUpstream {
		r.Default = c.upstreams
	}
	if cm == nil {
		return r, nil
	}
	where := cm.Namespace + "/" + cm.Name
	if v, ok := cm.Data[keyUpstreamNameservers]; ok {
		var list []string
		if err := json.Unmarshal([]byte(v), &list); err != nil {
			return r, fmt.Errorf("ConfigMap %s, %s: want a JSON list of IP addresses: %v", where, keyUpstreamNameservers, err)
		}
		if len(list) > maxUpstreamNameservers {
			return r, fmt.Errorf("ConfigMap %s, %s: %d servers, at most %d", where, keyUpstreamNameservers, len(list), maxUpstreamNameservers)
		}
		var def []string
		for _, s := range list {
			hp, err := upstreamAddr(s)
			if err != nil {
				return r, fmt.Errorf("ConfigMap %s, %s: %q: %v", where, keyUpstreamNameservers, s, err)
			}
			def = append(def, hp)
		}
		if len(def) > 0 {
			r.Default = def
		}
	}
	if v, ok := cm.Data[keyStubDomains]; ok {
		var stubs map[string][]string
		if err := json.Unmarshal([]byte(v), &stubs); err != nil {
			return r, fmt.Errorf("ConfigMap %s, %s: want a JSON object of domains to lists of IP addresses: %v", where, keyStubDomains, err)
		}
		if r.Zones == nil {
			r.Zones = map[string][]string{}
		}
		for z, list := range stubs {
			var servers []string
			for _, s := range list {
				hp, err := upstreamAddr(s)
				if err != nil {
					return r, fmt.Errorf("ConfigMap %s, %s: %s: %q: %v", where, keyStubDomains, z, s, err)
				}
				servers = append(servers, hp)
			}
			if err := addStub(r.Zones, z, servers, c.zone); err != nil {
				return r, fmt.Errorf("ConfigMap %s, %s: %v (--forward names it too?)", where, keyStubDomains, err)
			}
		}
	}
	return r, nil
}

// followConfigMap watches c's ConfigMap and sets the router's routes at
// every change; a bad ConfigMap is logged and the routes stay as they
// were. Its deletion brings back the flags' routes. The watch ends with
// stop; the returned function waits for that.
func (c *config) followConfigMap(client kubernetes.Interface, router *forward.Router, stop <-chan struct{}) (func(), error) {
	ns, name := c.configMap[0], c.configMap[1]
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + name }))
	apply := func(cm *corev1.ConfigMap) {
		r, err := c.routes(cm)
		if err != nil {
			slog.Error("stub domains and upstreams unchanged", "err", err)
			return
		}
		if r.Equal(router.Routes()) {
			return
		}
		if err := router.Set(r); err != nil {
			slog.Error("stub domains and upstreams unchanged", "configMap", ns+"/"+name, "err", err)
			return
		}
		slog.Info("stub domains and upstreams", "configMap", ns+"/"+name, "upstreams", r.Default, "stubDomains", r.Zones)
	}
	_, err := factory.Core().V1().ConfigMaps().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { apply(obj.(*corev1.ConfigMap)) },
		UpdateFunc: func(_, obj any) { apply(obj.(*corev1.ConfigMap)) },
		DeleteFunc: func(any) { apply(nil) },
	})
	if err != nil {
		return nil, err
	}
	factory.Start(stop)
	return factory.Shutdown, nil
}
