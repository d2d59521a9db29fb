package svcstate

import (
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// ServiceHandler adapts the tracker to a Service informer.
func (t *Tracker) ServiceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := obj.(*v1.Service); ok {
				t.OnServiceAdd(s)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, _ := oldObj.(*v1.Service)
			if n, ok := newObj.(*v1.Service); ok {
				t.OnServiceUpdate(o, n)
			}
		},
		DeleteFunc: func(obj any) {
			if s, ok := unwrapTombstone(obj).(*v1.Service); ok {
				t.OnServiceDelete(s)
			}
		},
	}
}

// EndpointSliceHandler adapts the tracker to a discovery.k8s.io/v1
// EndpointSlice informer.
func (t *Tracker) EndpointSliceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := obj.(*discovery.EndpointSlice); ok {
				t.OnEndpointSliceAdd(s)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, _ := oldObj.(*discovery.EndpointSlice)
			if n, ok := newObj.(*discovery.EndpointSlice); ok {
				t.OnEndpointSliceUpdate(o, n)
			}
		},
		DeleteFunc: func(obj any) {
			if s, ok := unwrapTombstone(obj).(*discovery.EndpointSlice); ok {
				t.OnEndpointSliceDelete(s)
			}
		},
	}
}

// unwrapTombstone returns the last known object of a delete the informer
// missed while disconnected.
func unwrapTombstone(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}
