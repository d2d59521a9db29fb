package svcstate

import (
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// ServiceHandler adapts the tracker to a Service informer.
func (t *Tracker) ServiceHandler() cache.ResourceEventHandler {
	return t.ofFamily(serviceOfFamily, typedHandler(t.OnServiceAdd, t.OnServiceUpdate, t.OnServiceDelete))
}

// EndpointSliceHandler adapts the tracker to a discovery.k8s.io/v1
// EndpointSlice informer. The tracker sees every slice, of its family
// or not: the version of each counts in Changes.SliceVersion.
func (t *Tracker) EndpointSliceHandler() cache.ResourceEventHandler {
	return typedHandler(t.OnEndpointSliceAdd, t.OnEndpointSliceUpdate, t.OnEndpointSliceDelete)
}

// typedHandler passes an informer's objects of type T to add, update and
// delete; others are ignored. An update's old object is nil when it is
// not a T, and a delete the informer missed gives its last known object.
func typedHandler[T any](add func(T), update func(old, cur T), del func(T)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := obj.(T); ok {
				add(o)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, _ := oldObj.(T)
			if n, ok := newObj.(T); ok {
				update(o, n)
			}
		},
		DeleteFunc: func(obj any) {
			if o, ok := unwrapTombstone(obj).(T); ok {
				del(o)
			}
		},
	}
}

// ofFamily passes h only the objects of the tracker's family, if it has
// one; an object that leaves the family is a delete, one that enters it
// an add.
func (t *Tracker) ofFamily(of func(any, v1.IPFamily) bool, h cache.ResourceEventHandler) cache.ResourceEventHandler {
	if t.cfg.Family == "" {
		return h
	}
	return cache.FilteringResourceEventHandler{FilterFunc: func(obj any) bool { return of(obj, t.cfg.Family) }, Handler: h}
}

func serviceOfFamily(obj any, family v1.IPFamily) bool {
	svc, ok := unwrapTombstone(obj).(*v1.Service)
	if !ok {
		return false
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	return slices.ContainsFunc(ips, func(s string) bool {
		a, err := netip.ParseAddr(s)
		return err == nil && Family(a.Unmap()) == family
	})
}

func sliceOfFamily(obj any, family v1.IPFamily) bool {
	s, ok := unwrapTombstone(obj).(*discovery.EndpointSlice)
	return ok && string(s.AddressType) == string(family)
}

// unwrapTombstone returns the last known object of a delete the informer
// missed while disconnected.
func unwrapTombstone(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}
