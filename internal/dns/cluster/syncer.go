package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
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
)

// DNSService is the Service whose addresses are the zone's nameservers
// (the NS record's target), as kubelet's --cluster-dns points pods at it.
const (
	DNSServiceNamespace = "kube-system"
	DNSServiceName      = "kube-dns"
)

// DefaultWindow is how long the syncer waits after a change for more
// before it rebuilds: long enough that a Deployment rollout's burst of
// slice updates costs one rebuild, short against the one-second promise
// for a new Service.
const DefaultWindow = 10 * time.Millisecond

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
// the API. Every change rebuilds the whole index and hands it to Set: the
// index is immutable, so readers never see half of a change, and a full
// build at 10,000 Services takes tens of milliseconds, which the window
// and the pacing in run amortize over bursts of changes.
type Syncer struct {
	opts     SyncOptions
	set      func(*index.Index, time.Time)
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	pods     corelisters.PodLister
	synced   []cache.InformerSynced
	log      *slog.Logger
	buildDur prometheus.Histogram

	kick     chan struct{}
	mu       sync.Mutex
	pending  time.Time // earliest change not yet in an index; zero when none
	syncedAt atomic.Pointer[time.Time]
	serial   uint32
}

// NewSyncer registers informers on factory (start it afterwards) and
// returns a syncer that calls set with each new index and the time of the
// oldest change it contains (zero for the first one).
func NewSyncer(factory informers.SharedInformerFactory, o SyncOptions, set func(*index.Index, time.Time)) (*Syncer, error) {
	o.Window = cmp.Or(o.Window, DefaultWindow)
	s := &Syncer{
		opts: o,
		set:  set,
		log:  cmp.Or(o.Logger, slog.Default()),
		kick: make(chan struct{}, 1),
		buildDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "svcnet_dns_zone_build_duration_seconds",
			Help:    "Time to build one zone snapshot from the informers' caches.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5ms .. 4s
		}),
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(s.buildDur); err != nil {
			return nil, err
		}
	}

	svcInf := factory.Core().V1().Services()
	sliceInf := factory.Discovery().V1().EndpointSlices()
	s.services, s.slices = svcInf.Lister(), sliceInf.Lister()
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
		regs = append(regs, registration{podInf.Informer(), trimPod, podChanged})
	}
	for _, r := range regs {
		// The transform must be set before the informer starts; a shared
		// factory of this package's own makes sure nobody else needs the
		// fields it drops.
		if err := r.inf.SetTransform(r.transform); err != nil {
			return nil, fmt.Errorf("dns informer transform: %w", err)
		}
		if _, err := r.inf.AddEventHandler(s.handler(r.changed)); err != nil {
			return nil, err
		}
		s.synced = append(s.synced, r.inf.HasSynced)
	}
	return s, nil
}

// changeFunc reports whether an event can change the zone and, when the
// object knows, when the change behind it happened.
type changeFunc func(old, cur any) (relevant bool, at time.Time)

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
	syncedAt := s.syncedAt.Load()
	if syncedAt == nil {
		// Before the first build every object goes in anyway: the
		// informer's store is updated before its handlers run.
		return
	}
	relevant, at := f(old, cur)
	if !relevant {
		return
	}
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
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Syncer) serviceChanged(old, cur any) (bool, time.Time) {
	o, _ := old.(*corev1.Service)
	c, _ := cur.(*corev1.Service)
	if o != nil && c != nil && reflect.DeepEqual(o.Spec, c.Spec) {
		return false, time.Time{} // status or metadata only
	}
	return true, time.Time{}
}

// sliceChanged skips slices of Services that are not headless: the zone
// answers those with the ClusterIP, so the endpoint churn of ordinary
// Services (most of all the churn in a cluster) costs no rebuild. A
// Service that becomes headless is rebuilt by its own event.
func (s *Syncer) sliceChanged(old, cur any) (bool, time.Time) {
	o, _ := old.(*discoveryv1.EndpointSlice)
	c, _ := cur.(*discoveryv1.EndpointSlice)
	sl := cmp.Or(c, o)
	if sl == nil {
		return true, time.Time{}
	}
	if o != nil && c != nil && o.AddressType == c.AddressType && reflect.DeepEqual(o.Endpoints, c.Endpoints) &&
		reflect.DeepEqual(o.Ports, c.Ports) && o.Labels[discoveryv1.LabelServiceName] == c.Labels[discoveryv1.LabelServiceName] {
		return false, time.Time{}
	}
	if name := sl.Labels[discoveryv1.LabelServiceName]; name != "" && (o == nil || o.Labels[discoveryv1.LabelServiceName] == name) {
		if svc, err := s.services.Services(sl.Namespace).Get(name); err == nil && !usesSlices(svc) {
			return false, time.Time{}
		}
	}
	var at time.Time
	if c != nil {
		if v, ok := c.Annotations[corev1.EndpointsLastChangeTriggerTime]; ok {
			at, _ = time.Parse(time.RFC3339Nano, v)
		}
	}
	return true, at
}

func usesSlices(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP == corev1.ClusterIPNone
}

// podChanged compares what trimPod keeps: addresses, phase and DNS
// settings, not the conditions and container states that change often.
func podChanged(old, cur any) (bool, time.Time) {
	o, _ := old.(*corev1.Pod)
	c, _ := cur.(*corev1.Pod)
	if o != nil && c != nil && reflect.DeepEqual(o.Spec, c.Spec) && reflect.DeepEqual(o.Status, c.Status) {
		return false, time.Time{}
	}
	return true, time.Time{}
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
		t.Reset(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		lastStart = time.Now()
		s.build()
		lastEnd = time.Now()
	}
}

// build makes an index from the listers and publishes it.
func (s *Syncer) build() (*index.Index, time.Duration) {
	s.mu.Lock()
	changed := s.pending
	s.pending = time.Time{}
	s.mu.Unlock()

	start := time.Now()
	opts := s.opts.Index
	s.serial = max(s.serial+1, uint32(start.Unix()))
	opts.Serial = s.serial
	svcs, _ := s.services.List(labels.Everything())
	slices, _ := s.slices.List(labels.Everything())
	var pods []*corev1.Pod
	if s.pods != nil {
		pods, _ = s.pods.List(labels.Everything())
	}
	opts.Nameservers = nameservers(svcs)
	idx := index.Build(opts, svcs, slices, pods)
	d := time.Since(start)
	s.buildDur.Observe(d.Seconds())
	s.set(idx, changed)
	s.log.Debug("DNS zone rebuilt", "services", idx.Services(), "serial", opts.Serial, "took", d)
	return idx, d
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
