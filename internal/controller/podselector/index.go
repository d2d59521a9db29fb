// Package podselector keeps, for every Service with a selector, the set of
// pods it selects, updated from informer events. Controllers read a
// service's pods from it instead of matching the selector against every
// pod of the namespace on each sync, which is what dominates their cost at
// 10,000 pods.
package podselector

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/controller"
)

// Index maps services to the pods they select. It is safe for concurrent
// use. Each controller keeps its own and updates it in its own event
// handlers before it queues a key, so a sync never reads membership older
// than the event that caused it.
type Index struct {
	pods corelisters.PodLister

	// synced report whether the registered handlers have seen every
	// object of their informers' first lists.
	synced []cache.InformerSynced

	mu        sync.RWMutex
	selectors map[string]selector        // service key -> selector
	byNS      map[string]map[string]bool // namespace -> service keys
	members   map[string]map[string]bool // service key -> pod names
	podSvcs   map[string]map[string]bool // pod key -> service keys
}

type selector struct {
	raw map[string]string
	sel labels.Selector
}

// New returns an empty index that reads pods from lister.
func New(lister corelisters.PodLister) *Index {
	return &Index{pods: lister, selectors: map[string]selector{}, byNS: map[string]map[string]bool{},
		members: map[string]map[string]bool{}, podSvcs: map[string]map[string]bool{}}
}

func key(ns, name string) string { return ns + "/" + name }

func add(m map[string]map[string]bool, k, v string) {
	if m[k] == nil {
		m[k] = map[string]bool{}
	}
	m[k][v] = true
}

func del(m map[string]map[string]bool, k, v string) {
	if s := m[k]; s != nil {
		delete(s, v)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}

// SetService records svc's selector; when it changed, membership is
// recomputed from the pod cache. A service without selector selects none.
func (x *Index) SetService(svc *corev1.Service) {
	k := key(svc.Namespace, svc.Name)
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.selectors[k]; ok && labels.Equals(old.raw, svc.Spec.Selector) {
		return
	}
	x.deleteServiceLocked(k, svc.Namespace)
	if svc.Spec.Selector == nil {
		return
	}
	sel := selector{raw: svc.Spec.Selector, sel: labels.SelectorFromValidatedSet(svc.Spec.Selector)}
	x.selectors[k] = sel
	add(x.byNS, svc.Namespace, k)
	pods, err := x.pods.Pods(svc.Namespace).List(sel.sel)
	if err != nil {
		return
	}
	for _, p := range pods {
		add(x.members, k, p.Name)
		add(x.podSvcs, key(p.Namespace, p.Name), k)
	}
}

// DeleteService forgets a service.
func (x *Index) DeleteService(namespace, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.deleteServiceLocked(key(namespace, name), namespace)
}

func (x *Index) deleteServiceLocked(k, ns string) {
	for p := range x.members[k] {
		del(x.podSvcs, key(ns, p), k)
	}
	delete(x.members, k)
	delete(x.selectors, k)
	del(x.byNS, ns, k)
}

// SetPod records pod's labels and returns the services that selected it
// before or select it now: the ones whose endpoints may change.
func (x *Index) SetPod(pod *corev1.Pod) []string {
	pk := key(pod.Namespace, pod.Name)
	set := labels.Set(pod.Labels)
	x.mu.Lock()
	defer x.mu.Unlock()
	affected := map[string]bool{}
	for s := range x.podSvcs[pk] {
		affected[s] = true
	}
	for s := range x.byNS[pod.Namespace] {
		matches := x.selectors[s].sel.Matches(set)
		switch {
		case matches:
			add(x.members, s, pod.Name)
			add(x.podSvcs, pk, s)
			affected[s] = true
		case x.members[s][pod.Name]:
			del(x.members, s, pod.Name)
			del(x.podSvcs, pk, s)
		}
	}
	return keys(affected)
}

// DeletePod forgets pod and returns the services that selected it.
func (x *Index) DeletePod(pod *corev1.Pod) []string {
	pk := key(pod.Namespace, pod.Name)
	x.mu.Lock()
	defer x.mu.Unlock()
	affected := x.podSvcs[pk]
	for s := range affected {
		del(x.members, s, pod.Name)
	}
	delete(x.podSvcs, pk)
	return keys(affected)
}

// Pods returns the pods service key selects, from the pod cache.
func (x *Index) Pods(namespace, name string) []*corev1.Pod {
	x.mu.RLock()
	names := make([]string, 0, len(x.members[key(namespace, name)]))
	for p := range x.members[key(namespace, name)] {
		names = append(names, p)
	}
	x.mu.RUnlock()
	out := make([]*corev1.Pod, 0, len(names))
	for _, n := range names {
		if p, err := x.pods.Pods(namespace).Get(n); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Register adds the index's handlers to the informers (see Handlers).
func (x *Index) Register(services, pods cache.SharedIndexInformer, changed func(serviceKey string)) error {
	svcHandler, podHandler := x.Handlers(changed)
	for _, r := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{{services, svcHandler}, {pods, podHandler}} {
		reg, err := r.inf.AddEventHandler(r.h)
		if err != nil {
			return err
		}
		x.synced = append(x.synced, reg.HasSynced)
	}
	return nil
}

// HasSynced reports whether the index holds every Service and Pod of the
// informers' first lists. An informer's store being synced is not
// enough: its handlers may still have notifications queued, and a sync
// that read the index then would see a Service with some of its pods
// missing — and write endpoint slices without them (seen when the
// controller manager restarted under load: Services lost their endpoints
// for a moment). Controllers wait for this before their first sync.
func (x *Index) HasSynced() bool {
	for _, s := range x.synced {
		if !s() {
			return false
		}
	}
	return len(x.synced) > 0
}

// Handlers keep the index current from Service and Pod events and call
// changed with the key of every Service whose pods may have changed (a
// Service's own events included). Registering them is all a controller
// needs to do to use the index.
func (x *Index) Handlers(changed func(serviceKey string)) (services, pods cache.ResourceEventHandlerFuncs) {
	svc := func(obj any, deleted bool) {
		s, ok := controller.As[*corev1.Service](obj)
		if !ok {
			return
		}
		if deleted {
			x.DeleteService(s.Namespace, s.Name)
		} else {
			x.SetService(s)
		}
		changed(key(s.Namespace, s.Name))
	}
	pod := func(obj any, deleted bool) {
		p, ok := controller.As[*corev1.Pod](obj)
		if !ok {
			return
		}
		var keys []string
		if deleted {
			keys = x.DeletePod(p)
		} else {
			keys = x.SetPod(p)
		}
		for _, k := range keys {
			changed(k)
		}
	}
	services = cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { svc(o, false) },
		UpdateFunc: func(_, o any) { svc(o, false) },
		DeleteFunc: func(o any) { svc(o, true) },
	}
	pods = cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { pod(o, false) },
		UpdateFunc: func(_, o any) { pod(o, false) },
		DeleteFunc: func(o any) { pod(o, true) },
	}
	return services, pods
}
