package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/dns/index"
	"github.com/svcnet/svcnet/internal/prom"
)

// DNSService is the Service whose addresses are the zone's nameservers
// (the NS record's target), as kubelet's --cluster-dns points pods at it.
const (
	DNSServiceNamespace = "kube-system"
	DNSServiceName      = "kube-dns"
)

// DefaultWindow is how long the syncer waits after a change for more
// before it publishes a snapshot: an update costs tens of microseconds,
// so the window only lets events that arrive together (a rollout's slice
// updates, delivered in one read of the watch) share a snapshot. Under a
// millisecond it is one yield, not a timer (see Run).
const DefaultWindow = 100 * time.Microsecond

// SyncOptions configure a Syncer.
type SyncOptions struct {
	// Index is the base of every build; the syncer fills in Serial,
	// Nameservers and NotSynced.
	Index index.Options
	// WatchPods starts a Pod informer; only pod records in verified mode
	// and autopath need pods, and at scale they are most of the watch
	// traffic.
	WatchPods bool
	// Window coalesces changes (DefaultWindow when zero).
	Window     time.Duration
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Syncer keeps a zone equal to the Services, EndpointSlices and Pods of
// the API. After the first build from the informers' caches, a change
// updates only the Services and Pods it names (index.Updater) and hands a
// new snapshot to set: the snapshot is immutable, so readers never see
// half of a change, and its cost is the size of the change, not of the
// zone. The window coalesces bursts of changes into one snapshot.
type Syncer struct {
	opts     SyncOptions
	set      func(*index.Index, time.Time)
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	byOwner  cache.Indexer // EndpointSlices by their Service's key
	pods     corelisters.PodLister
	synced   []cache.InformerSynced
	log      *slog.Logger
	buildDur prometheus.Histogram

	kick     chan struct{}
	mu       sync.Mutex
	pending  time.Time           // earliest change not yet in an index; zero when none
	dirtySvc map[string]struct{} // namespace/name of Services to update
	dirtyPod map[string]struct{} // namespace/name of Pods to update
	syncedAt atomic.Pointer[time.Time]
	serial   uint32
	upd      *index.Updater // nil until the first build; only build uses it

	// onEvent, in tests, runs as each event reaches the handler (a slow
	// handler, whose queue lags behind the informer's store).
	onEvent func()
}

// sliceOwnerIndex indexes EndpointSlices by namespace/service-name.
const sliceOwnerIndex = "service"

func sliceOwner(obj any) ([]string, error) {
	sl, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	if name := sl.Labels[discoveryv1.LabelServiceName]; name != "" {
		return []string{sl.Namespace + "/" + name}, nil
	}
	return nil, nil
}

// NewSyncer registers informers on factory (start it afterwards) and
// returns a syncer that calls set with each new index and the time of the
// oldest change it contains (zero for the first one).
func NewSyncer(factory informers.SharedInformerFactory, o SyncOptions, set func(*index.Index, time.Time)) (*Syncer, error) {
	o.Window = cmp.Or(o.Window, DefaultWindow)
	s := &Syncer{
		opts:     o,
		set:      set,
		log:      cmp.Or(o.Logger, slog.Default()),
		kick:     make(chan struct{}, 1),
		dirtySvc: map[string]struct{}{},
		dirtyPod: map[string]struct{}{},
		buildDur: prom.Histogram("svcnet_dns_zone_build_duration_seconds",
			"Time to make one zone snapshot: the first from the informers' caches, the others by updating the changed Services and Pods.",
			prometheus.ExponentialBuckets(0.0005, 2, 14)), // 0.5ms .. 4s
	}
	if err := prom.Register(o.Registerer, s.buildDur); err != nil {
		return nil, err
	}

	svcInf := factory.Core().V1().Services()
	sliceInf := factory.Discovery().V1().EndpointSlices()
	s.services, s.slices = svcInf.Lister(), sliceInf.Lister()
	if err := sliceInf.Informer().AddIndexers(cache.Indexers{sliceOwnerIndex: sliceOwner}); err != nil {
		return nil, err
	}
	s.byOwner = sliceInf.Informer().GetIndexer()
	type registration struct {
		inf       cache.SharedIndexInformer
		transform cache.TransformFunc
		changed   changeFunc
	}
	regs := []registration{
		{svcInf.Informer(), trimService, s.serviceChanged},
		{sliceInf.Informer(), trimSlice, s.sliceChanged},
	}
	if o.WatchPods {
		podInf := factory.Core().V1().Pods()
		s.pods = podInf.Lister()
		regs = append(regs, registration{podInf.Informer(), trimPod, s.podChanged})
	}
	for _, r := range regs {
		// The transform must be set before the informer starts; a shared
		// factory of this package's own makes sure nobody else needs the
		// fields it drops.
		if err := r.inf.SetTransform(r.transform); err != nil {
			return nil, fmt.Errorf("dns informer transform: %w", err)
		}
		reg, err := r.inf.AddEventHandler(s.handler(r.changed))
		if err != nil {
			return nil, err
		}
		// Synced once the handler has been given every object of the
		// initial list, not only once the informer's store holds them:
		// the handler gets them from a queue of its own, and at 100,000
		// Services thousands were still queued when the store was
		// complete. Each then marked its Service changed, and the first
		// real change waited behind half a second to seconds of updates
		// that changed nothing.
		s.synced = append(s.synced, reg.HasSynced)
	}
	return s, nil
}

// changeFunc reports whether an event can change the zone, which
// Services (namespace/name) and Pods it changes, and, when the object
// knows, when the change behind it happened.
type changeFunc func(old, cur any) change

type change struct {
	relevant bool
	at       time.Time
	services []string
	pod      string
}

func (s *Syncer) handler(f changeFunc) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.event(f, nil, obj) },
		UpdateFunc: func(old, cur any) { s.event(f, old, cur) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			s.event(f, obj, nil)
		},
	}
}

func (s *Syncer) event(f changeFunc, old, cur any) {
	if s.onEvent != nil {
		s.onEvent()
	}
	syncedAt := s.syncedAt.Load()
	if syncedAt == nil {
		// Before the first build every object goes in anyway: the
		// informer's store is updated before its handlers run.
		return
	}
	ch := f(old, cur)
	if !ch.relevant {
		return
	}
	at := ch.at
	now := time.Now()
	// A trigger time from before we synced (an old change a controller
	// acts on only now) or from a skewed clock would measure us for time
	// we could not have done anything.
	if at.IsZero() || at.Before(*syncedAt) || at.After(now) {
		at = now
	}
	s.mu.Lock()
	if s.pending.IsZero() || at.Before(s.pending) {
		s.pending = at
	}
	for _, k := range ch.services {
		s.dirtySvc[k] = struct{}{}
	}
	if ch.pod != "" {
		s.dirtyPod[ch.pod] = struct{}{}
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Syncer) serviceChanged(old, cur any) change {
	o, _ := old.(*corev1.Service)
	c, _ := cur.(*corev1.Service)
	if o != nil && c != nil && reflect.DeepEqual(o.Spec, c.Spec) {
		return change{} // status or metadata only
	}
	svc := cmp.Or(c, o)
	if svc == nil {
		return change{}
	}
	return change{relevant: true, services: []string{svc.Namespace + "/" + svc.Name}}
}

// sliceChanged skips slices of ExternalName Services, which publish no
// endpoints, and changes the zone cannot see (a node name, the serving
// condition). Every other Service names its ready endpoints (headless
// ones in their own name too), so their churn updates just that
// Service.
func (s *Syncer) sliceChanged(old, cur any) change {
	o, _ := old.(*discoveryv1.EndpointSlice)
	c, _ := cur.(*discoveryv1.EndpointSlice)
	sl := cmp.Or(c, o)
	if sl == nil {
		return change{}
	}
	if o != nil && c != nil && o.AddressType == c.AddressType && reflect.DeepEqual(o.Endpoints, c.Endpoints) &&
		reflect.DeepEqual(o.Ports, c.Ports) && o.Labels[discoveryv1.LabelServiceName] == c.Labels[discoveryv1.LabelServiceName] {
		return change{}
	}
	var owners []string
	for _, x := range []*discoveryv1.EndpointSlice{o, c} {
		if x == nil {
			continue
		}
		name := x.Labels[discoveryv1.LabelServiceName]
		if name == "" || slices.Contains(owners, x.Namespace+"/"+name) {
			continue
		}
		if svc, err := s.services.Services(x.Namespace).Get(name); err == nil && !usesSlices(svc) {
			continue
		}
		owners = append(owners, x.Namespace+"/"+name)
	}
	if len(owners) == 0 {
		return change{}
	}
	var at time.Time
	if c != nil {
		if v, ok := c.Annotations[corev1.EndpointsLastChangeTriggerTime]; ok {
			at, _ = time.Parse(time.RFC3339Nano, v)
		}
	}
	return change{relevant: true, at: at, services: owners}
}

func usesSlices(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName
}

// podChanged compares what trimPod keeps: addresses, phase and DNS
// settings, not the conditions and container states that change often.
func (s *Syncer) podChanged(old, cur any) change {
	o, _ := old.(*corev1.Pod)
	c, _ := cur.(*corev1.Pod)
	if o != nil && c != nil && reflect.DeepEqual(o.Spec, c.Spec) && reflect.DeepEqual(o.Status, c.Status) {
		return change{}
	}
	p := cmp.Or(c, o)
	if p == nil {
		return change{}
	}
	return change{relevant: true, pod: p.Namespace + "/" + p.Name}
}

// Run waits for the informers to sync, publishes the first index, and
// then rebuilds on every change until ctx ends. Until the first index the
// zone answers SERVFAIL, so nobody caches an NXDOMAIN for a name that
// merely has not been listed yet.
func (s *Syncer) Run(ctx context.Context) error {
	opts := s.opts.Index
	opts.NotSynced = true
	s.set(index.Build(opts, nil, nil, nil), time.Time{})

	start := time.Now()
	if !cache.WaitForCacheSync(ctx.Done(), s.synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("dns: informer caches did not sync")
	}
	now := time.Now()
	s.syncedAt.Store(&now)
	idx, _ := s.build()
	s.log.Info("DNS zone synced", "services", idx.Services(), "after", time.Since(start).Round(time.Millisecond))

	var lastStart, lastEnd time.Time
	t := time.NewTimer(0)
	<-t.C
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
		}
		// Wait out the window, and keep at least as long between builds
		// as the last one took, so that under constant churn rebuilding
		// takes at most about half of a core and answering keeps the
		// rest. A lone change after a quiet spell waits the window only.
		now := time.Now()
		wait := s.opts.Window
		if next := lastEnd.Add(lastEnd.Sub(lastStart)); next.After(now.Add(wait)) {
			wait = next.Sub(now)
		}
		if wait < time.Millisecond && wait == s.opts.Window {
			// Go's timers cannot wait less than about a millisecond in
			// an idle process (the poller sleeps in whole milliseconds),
			// so a shorter window cost every lone change a millisecond:
			// svcnet answered a new Service one poll step after CoreDNS.
			// Yielding once lets the events delivered together with this
			// one (the informer hands them over one by one) join it.
			runtime.Gosched()
		} else {
			t.Reset(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
		lastStart = time.Now()
		s.build()
		lastEnd = time.Now()
	}
}

// build publishes a new index: the first from everything in the
// listers, the next ones by updating only the Services and Pods that
// changed since.
func (s *Syncer) build() (*index.Index, time.Duration) {
	s.mu.Lock()
	changed := s.pending
	s.pending = time.Time{}
	svcKeys, podKeys := s.dirtySvc, s.dirtyPod
	s.dirtySvc, s.dirtyPod = map[string]struct{}{}, map[string]struct{}{}
	s.mu.Unlock()

	start := time.Now()
	// The SOA serial is the second of the last change, as CoreDNS's
	// kubernetes plugin makes it: denials carry it, so a finer one would
	// make every change re-answer every memoized denial.
	s.serial = max(s.serial, uint32(start.Unix()))
	if s.upd == nil {
		s.upd = index.NewUpdater(s.opts.Index)
		svcs, _ := s.services.List(labels.Everything())
		for _, svc := range svcs {
			s.updateService(svc.Namespace, svc.Name, svc)
		}
		if s.pods != nil {
			pods, _ := s.pods.List(labels.Everything())
			for _, p := range pods {
				s.upd.SetPod(p.Namespace+"/"+p.Name, p)
			}
		}
	} else {
		for k := range svcKeys {
			ns, name, _ := strings.Cut(k, "/")
			svc, err := s.services.Services(ns).Get(name)
			if err != nil {
				svc = nil // deleted
			}
			s.updateService(ns, name, svc)
		}
		for k := range podKeys {
			ns, name, _ := strings.Cut(k, "/")
			p, err := s.pods.Pods(ns).Get(name)
			if err != nil {
				p = nil
			}
			s.upd.SetPod(k, p)
		}
	}
	idx := s.upd.Snapshot(s.serial)
	d := time.Since(start)
	s.buildDur.Observe(d.Seconds())
	s.set(idx, changed)
	s.log.Debug("DNS zone updated", "services", idx.Services(), "changedServices", len(svcKeys), "changedPods", len(podKeys),
		"serial", s.serial, "took", d)
	return idx, d
}

// updateService gives the updater the Service ns/name (nil: deleted) with
// its EndpointSlices, and the zone's nameservers when it is kube-dns.
func (s *Syncer) updateService(ns, name string, svc *corev1.Service) {
	var sls []*discoveryv1.EndpointSlice
	if svc != nil && usesSlices(svc) {
		objs, _ := s.byOwner.ByIndex(sliceOwnerIndex, ns+"/"+name)
		for _, o := range objs {
			sls = append(sls, o.(*discoveryv1.EndpointSlice))
		}
		// The order the zone lists endpoints in must not depend on the
		// cache's.
		slices.SortFunc(sls, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	}
	s.upd.SetService(ns, name, svc, sls)
	if ns == DNSServiceNamespace && name == DNSServiceName {
		var list []*corev1.Service
		if svc != nil {
			list = []*corev1.Service{svc}
		}
		s.upd.SetNameservers(nameservers(list))
	}
}

func nameservers(svcs []*corev1.Service) []netip.Addr {
	for _, svc := range svcs {
		if svc.Namespace != DNSServiceNamespace || svc.Name != DNSServiceName {
			continue
		}
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 {
			ips = []string{svc.Spec.ClusterIP}
		}
		var out []netip.Addr
		for _, s := range ips {
			if ip, err := netip.ParseAddr(s); err == nil {
				out = append(out, ip)
			}
		}
		return out
	}
	return nil
}

// The transforms keep what the index reads and drop the rest (managed
// fields, most annotations, pod specs), which is most of an object's
// memory and makes the equality checks above see only relevant changes.

func trimService(obj any) (any, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	return &corev1.Service{
		ObjectMeta: trimMeta(svc.ObjectMeta, false),
		Spec: corev1.ServiceSpec{
			Type:                     svc.Spec.Type,
			ClusterIP:                svc.Spec.ClusterIP,
			ClusterIPs:               svc.Spec.ClusterIPs,
			Ports:                    svc.Spec.Ports,
			ExternalName:             svc.Spec.ExternalName,
			PublishNotReadyAddresses: svc.Spec.PublishNotReadyAddresses,
		},
	}, nil
}

func trimSlice(obj any) (any, error) {
	sl, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	eps := make([]discoveryv1.Endpoint, len(sl.Endpoints))
	for i, ep := range sl.Endpoints {
		eps[i] = discoveryv1.Endpoint{
			Addresses:  ep.Addresses,
			Conditions: discoveryv1.EndpointConditions{Ready: ep.Conditions.Ready},
			Hostname:   ep.Hostname,
		}
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  trimMeta(sl.ObjectMeta, true, corev1.EndpointsLastChangeTriggerTime),
		AddressType: sl.AddressType,
		Endpoints:   eps,
		Ports:       sl.Ports,
	}, nil
}

func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		ObjectMeta: trimMeta(p.ObjectMeta, false),
		Spec:       corev1.PodSpec{HostNetwork: p.Spec.HostNetwork, DNSPolicy: p.Spec.DNSPolicy},
		Status:     corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs},
	}
	if p.Spec.DNSConfig != nil && len(p.Spec.DNSConfig.Searches) > 0 {
		out.Spec.DNSConfig = &corev1.PodDNSConfig{Searches: p.Spec.DNSConfig.Searches}
	}
	// Phase Running/Pending/Unknown all count the same for the index.
	if out.Status.Phase != corev1.PodSucceeded && out.Status.Phase != corev1.PodFailed {
		out.Status.Phase = corev1.PodRunning
	}
	return out, nil
}

// trimMeta keeps the key, the labels when asked (slices name their
// Service in one) and the listed annotations.
func trimMeta(m metav1.ObjectMeta, keepLabels bool, keepAnnotations ...string) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion}
	if keepLabels {
		out.Labels = m.Labels
	}
	for _, k := range keepAnnotations {
		if v, ok := m.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	return out
}
