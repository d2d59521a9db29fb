package cluster

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/internal/dns/index"
)

var quiet = slog.New(slog.DiscardHandler)

// published records what a syncer hands to the server.
type published struct {
	mu      sync.Mutex
	indexes []*index.Index
	changed []time.Time
	notify  chan struct{}
}

func (p *published) set(idx *index.Index, changed time.Time) {
	p.mu.Lock()
	p.indexes = append(p.indexes, idx)
	p.changed = append(p.changed, changed)
	p.mu.Unlock()
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

func (p *published) last() (*index.Index, time.Time, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.indexes)
	if n == 0 {
		return nil, time.Time{}, 0
	}
	return p.indexes[n-1], p.changed[n-1], n
}

// waitFor waits until the latest index satisfies ok.
func (p *published) waitFor(t *testing.T, what string, ok func(*index.Index) bool) (*index.Index, time.Time) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if idx, at, _ := p.last(); idx != nil && ok(idx) {
			return idx, at
		}
		select {
		case <-p.notify:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func startSyncer(t *testing.T, watchPods bool, objs ...runtime.Object) (*fake.Clientset, *published) {
	t.Helper()
	return startSyncerWindow(t, watchPods, 0, objs...)
}

// startSyncerWindow is startSyncer with a coalescing window (0: default).
func startSyncerWindow(t *testing.T, watchPods bool, window time.Duration, objs ...runtime.Object) (*fake.Clientset, *published) {
	t.Helper()
	return startSyncerHook(t, watchPods, window, nil, objs...)
}

// startSyncerHook is startSyncerWindow with a function run as each event
// reaches the syncer's handler.
func startSyncerHook(t *testing.T, watchPods bool, window time.Duration, onEvent func(), objs ...runtime.Object) (*fake.Clientset, *published) {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	p := &published{notify: make(chan struct{}, 1)}
	s, err := NewSyncer(factory, SyncOptions{
		Index:      index.Options{Pods: index.PodsVerified},
		WatchPods:  watchPods,
		Window:     window,
		Registerer: prometheus.NewRegistry(),
		Logger:     quiet,
	}, p.set)
	if err != nil {
		t.Fatal(err)
	}
	s.onEvent = onEvent
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return client, p
}

func has(idx *index.Index, name string, t uint16) bool {
	n, ok := idx.Lookup(name)
	return ok && len(n.RRs(t)) > 0
}

// TestSyncerStartsQuiet: the objects of the initial list are in the
// first synced index and are not taken for changes afterwards — no
// further index is built until something changes, and the first change
// is published on its own — also when the handler's queue lags behind
// the informer's store (as at 100,000 Services).
func TestSyncerStartsQuiet(t *testing.T) {
	const n = 2000
	objs := make([]runtime.Object, n)
	for i := range objs {
		objs[i] = dnstest.Service("ns"+strconv.Itoa(i%20), "svc-"+strconv.Itoa(i), []string{netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}).String()},
			dnstest.Port("http", corev1.ProtocolTCP, 80))
	}
	var events atomic.Int32
	slow := func() {
		if events.Add(1) <= 200 {
			time.Sleep(time.Millisecond)
		}
	}
	client, p := startSyncerHook(t, false, 0, slow, objs...)
	idx, _ := p.waitFor(t, "the first synced index", (*index.Index).Synced)
	if got := idx.Services(); got != n {
		t.Fatalf("first synced index has %d Services, want %d", got, n)
	}
	_, _, first := p.last()
	time.Sleep(300 * time.Millisecond)
	if _, _, now := p.last(); now != first {
		t.Errorf("%d indexes built after the synced one with nothing changed: the initial list was taken for changes", now-first)
	}
	svc := dnstest.Service("default", "late", []string{"10.97.0.1"}, dnstest.Port("http", corev1.ProtocolTCP, 80))
	if _, err := client.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, "the late Service", func(idx *index.Index) bool { return has(idx, "late.default.svc.cluster.local.", dns.TypeA) })
	if _, _, now := p.last(); now != first+1 {
		t.Errorf("the late Service came in index %d after the synced one, want the next one", now-first)
	}
}

func TestSyncerFollowsTheAPI(t *testing.T) {
	tcp := corev1.ProtocolTCP
	kubeDNS := dnstest.Service("kube-system", "kube-dns", []string{"10.96.0.10"}, dnstest.Port("dns", corev1.ProtocolUDP, 53))
	client, p := startSyncer(t, true,
		dnstest.Service("default", "kubernetes", []string{"10.96.0.1"}, dnstest.Port("https", tcp, 443)),
		kubeDNS,
		dnstest.Pod("default", "client", "10.244.0.5"),
	)
	ctx := context.Background()

	idx, at := p.waitFor(t, "the first synced index", (*index.Index).Synced)
	synced := time.Now()
	if !at.IsZero() {
		t.Errorf("first index has change time %v, want none (it is the initial state, not a change)", at)
	}
	if !has(idx, "kubernetes.default.svc.cluster.local.", dns.TypeA) {
		t.Error("kubernetes.default missing from the first index")
	}
	if !has(idx, "ns.dns.cluster.local.", dns.TypeA) {
		t.Error("ns.dns.cluster.local has no address: the kube-dns Service IP should be the nameserver")
	}
	if _, ok := idx.Lookup("10-244-0-5.default.pod.cluster.local."); !ok {
		t.Error("pod record missing in verified mode")
	}

	before := time.Now()
	if _, err := client.CoreV1().Services("default").Create(ctx,
		dnstest.Service("default", "new", []string{"10.96.0.77"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, at = p.waitFor(t, "the new Service", func(idx *index.Index) bool {
		return has(idx, "new.default.svc.cluster.local.", dns.TypeA)
	})
	if at.Before(before) || at.After(time.Now()) {
		t.Errorf("change time %v is not the time of the event (after %v)", at, before)
	}

	// A headless Service follows its slices, and the controller's trigger
	// time is what the latency metric counts from.
	if _, err := client.CoreV1().Services("default").Create(ctx, dnstest.Headless("default", "web", false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Wait for the Service first, so the slice is the only change in
	// the next index.
	p.waitFor(t, "the headless Service", func(idx *index.Index) bool { return idx.Services() == 4 })
	// A trigger time before the event but after the sync (older ones are
	// not ours to measure).
	trigger := synced.Add(time.Since(synced) / 2).UTC().Truncate(time.Microsecond)
	sl := dnstest.Slice("default", "web", "web-1", discoveryv1.AddressTypeIPv4, nil, dnstest.Endpoint{IP: "10.244.0.9", Hostname: "web-0"})
	sl.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: trigger.Format(time.RFC3339Nano)}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, at = p.waitFor(t, "the headless endpoint", func(idx *index.Index) bool {
		return has(idx, "web-0.web.default.svc.cluster.local.", dns.TypeA)
	})
	if !at.Equal(trigger) {
		t.Errorf("change time = %v, want the slice's trigger time %v", at, trigger)
	}

	sl.Endpoints[0].Conditions.Ready = new(bool)
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, "the endpoint to leave when not ready", func(idx *index.Index) bool {
		_, ok := idx.Lookup("web.default.svc.cluster.local.")
		return !ok // a headless Service without ready endpoints does not exist
	})

	if err := client.CoreV1().Services("default").Delete(ctx, "new", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, "the deleted Service to go", func(idx *index.Index) bool {
		_, ok := idx.Lookup("new.default.svc.cluster.local.")
		return !ok
	})
	if err := client.CoreV1().Pods("default").Delete(ctx, "client", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, "the deleted pod's record to go", func(idx *index.Index) bool {
		_, ok := idx.Lookup("10-244-0-5.default.pod.cluster.local.")
		return !ok
	})
	kubeDNS.Spec.ClusterIP, kubeDNS.Spec.ClusterIPs = "10.96.0.11", []string{"10.96.0.11"}
	if _, err := client.CoreV1().Services("kube-system").Update(ctx, kubeDNS, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, "the nameserver to follow kube-dns", func(idx *index.Index) bool {
		n, ok := idx.Lookup("ns.dns.cluster.local.")
		return ok && len(n.RRs(dns.TypeA)) == 1 && n.RRs(dns.TypeA)[0].(*dns.A).A.String() == "10.96.0.11"
	})
}

// TestSyncerCoalesces: a burst of changes costs far fewer rebuilds than
// changes, and the last index has all of them.
func TestSyncerCoalesces(t *testing.T) {
	// A window longer than the burst takes to send even under the race
	// detector: what is checked is that changes within it coalesce.
	client, p := startSyncerWindow(t, false, 500*time.Millisecond)
	p.waitFor(t, "sync", (*index.Index).Synced)
	_, _, before := p.last()
	ctx := context.Background()
	const n = 200
	for i := range n {
		ip := netip.AddrFrom4([4]byte{10, 96, 1, byte(i)}).String()
		svc := dnstest.Service("default", "burst-"+strconv.Itoa(i), []string{ip})
		if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p.waitFor(t, "every Service of the burst", func(idx *index.Index) bool { return idx.Services() == n })
	_, _, after := p.last()
	if builds := after - before; builds >= n/2 {
		t.Errorf("%d rebuilds for %d changes: changes are not coalesced", builds, n)
	}
}

func ptrBool(b bool) *bool { return &b }

func TestChangeFilters(t *testing.T) {
	client := fake.NewClientset(
		dnstest.Service("default", "plain", []string{"10.96.0.5"}),
		dnstest.Headless("default", "web", false),
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	s, err := NewSyncer(factory, SyncOptions{Logger: quiet}, func(*index.Index, time.Time) {})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()

	slice := func(svc string, ready bool, mod func(*discoveryv1.EndpointSlice)) *discoveryv1.EndpointSlice {
		sl := dnstest.Slice("default", svc, svc+"-1", discoveryv1.AddressTypeIPv4, nil, dnstest.Endpoint{IP: "10.244.0.1", NotReady: !ready})
		if mod != nil {
			mod(sl)
		}
		out, _ := trimSlice(sl)
		return out.(*discoveryv1.EndpointSlice)
	}
	svc := func(mod func(*corev1.Service)) *corev1.Service {
		s := dnstest.Service("default", "plain", []string{"10.96.0.5"})
		if mod != nil {
			mod(s)
		}
		out, _ := trimService(s)
		return out.(*corev1.Service)
	}
	pod := func(mod func(*corev1.Pod)) *corev1.Pod {
		p := dnstest.Pod("default", "p", "10.244.0.1")
		if mod != nil {
			mod(p)
		}
		out, _ := trimPod(p)
		return out.(*corev1.Pod)
	}

	cases := []struct {
		name     string
		changed  changeFunc
		old, cur any
		want     bool
	}{
		{"headless slice added", s.sliceChanged, nil, slice("web", true, nil), true},
		{"headless slice readiness", s.sliceChanged, slice("web", true, nil), slice("web", false, nil), true},
		{"headless slice node moved", s.sliceChanged, slice("web", true, nil), slice("web", true, func(sl *discoveryv1.EndpointSlice) {
			sl.Endpoints[0].NodeName = ptrStr("node-2")
			sl.Endpoints[0].Conditions.Serving = ptrBool(true)
		}), false},
		{"headless slice deleted", s.sliceChanged, slice("web", true, nil), nil, true},
		{"ClusterIP slice readiness", s.sliceChanged, slice("plain", true, nil), slice("plain", false, nil), true},
		{"ClusterIP slice deleted", s.sliceChanged, slice("plain", true, nil), nil, true},
		{"slice of unknown Service", s.sliceChanged, nil, slice("unknown", true, nil), true},
		{"slice moved to another Service", s.sliceChanged, slice("plain", true, nil), slice("plain", true, func(sl *discoveryv1.EndpointSlice) {
			sl.Labels[discoveryv1.LabelServiceName] = "web"
		}), true},
		{"Service added", s.serviceChanged, nil, svc(nil), true},
		{"Service status only", s.serviceChanged, svc(nil), svc(func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
			s.Annotations = map[string]string{"x": "y"}
		}), false},
		{"Service selector only", s.serviceChanged, svc(nil), svc(func(s *corev1.Service) { s.Spec.Selector = map[string]string{"a": "b"} }), false},
		{"Service port", s.serviceChanged, svc(nil), svc(func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{{Name: "x", Port: 1}} }), true},
		{"Service deleted", s.serviceChanged, svc(nil), nil, true},
		{"pod conditions only", s.podChanged, pod(nil), pod(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			p.Labels = map[string]string{"a": "b"}
		}), false},
		{"pod pending to running", s.podChanged, pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }), pod(nil), false},
		{"pod succeeded", s.podChanged, pod(nil), pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), true},
		{"pod IP", s.podChanged, pod(nil), pod(func(p *corev1.Pod) { p.Status.PodIPs = nil; p.Status.PodIP = "" }), true},
		{"pod host network", s.podChanged, pod(nil), pod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch := tc.changed(tc.old, tc.cur)
			if ch.relevant != tc.want {
				t.Errorf("relevant = %v, want %v", ch.relevant, tc.want)
			}
			// What a relevant change names is what the next snapshot
			// updates.
			if ch.relevant && len(ch.services) == 0 && ch.pod == "" {
				t.Error("a relevant change names no Service and no Pod")
			}
			if ch.relevant && tc.name == "slice moved to another Service" && !slices.Equal(ch.services, []string{"default/plain", "default/web"}) {
				t.Errorf("services %v, want both", ch.services)
			}
		})
	}
}

func ptrStr(s string) *string { return &s }
