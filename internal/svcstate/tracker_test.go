package svcstate_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/svcstate"
	. "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

var (
	tcp = v1.ProtocolTCP
	udp = v1.ProtocolUDP
	t0  = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

func newTracker(node string) *svcstate.Tracker {
	now := t0
	return svcstate.NewTracker(svcstate.Config{
		NodeName: node,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:      func() time.Time { now = now.Add(time.Second); return now },
	})
}

func spn(ns, name, port string, proto v1.Protocol) svcstate.ServicePortName {
	return svcstate.ServicePortName{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Port: port, Protocol: proto}
}

func epStrings(eps []svcstate.Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.String())
	}
	return out
}

func TestServicePortNameString(t *testing.T) {
	if got := spn("default", "kubernetes", "https", tcp).String(); got != "default/kubernetes:https" {
		t.Errorf("got %q", got)
	}
	if got := spn("ns", "web", "", tcp).String(); got != "ns/web" {
		t.Errorf("got %q", got)
	}
}

func TestServiceAndSlices(t *testing.T) {
	tr := newTracker("node-a")
	tr.OnServiceAdd(Service("ns", "web", "10.96.0.10",
		Port("http", tcp, 80, 0), Port("dns", udp, 53, 0)))
	tr.OnEndpointSliceAdd(Slice("ns", "web", "web-b",
		SlicePort("http", tcp, 9090),
		Endpoint("10.244.2.2", "node-b", Zone("z2"), Hostname("web-1")),
		TriggerTime(t0.Add(-time.Minute))))
	tr.OnEndpointSliceAdd(Slice("ns", "web", "web-a",
		SlicePort("http", tcp, 8080), SlicePort("dns", udp, 5353),
		Endpoint("10.244.1.10", "node-a"),
		Endpoint("10.244.1.2", "node-a", NotReady()),
		TriggerTime(t0.Add(-2*time.Minute))))

	snap, ch := tr.Snapshot()
	http, dns := spn("ns", "web", "http", tcp), spn("ns", "web", "dns", udp)
	if len(ch.Ports) != 2 {
		t.Fatalf("changed ports = %v", ch.Ports)
	}
	if got := ch.TriggerTimes[http.NamespacedName]; !got.Equal(t0.Add(-2 * time.Minute)) {
		t.Errorf("trigger time = %v, want the earliest annotation", got)
	}
	p, eps := snap.Port(http)
	if p == nil || p.Port != 80 || p.ClusterIP(v1.IPv4Protocol) != netip.MustParseAddr("10.96.0.10") {
		t.Fatalf("port = %+v", p)
	}
	// Target ports come from each slice; order is kube-proxy's string order.
	if got, want := epStrings(eps), []string{"10.244.1.10:8080", "10.244.1.2:8080", "10.244.2.2:9090"}; !slices.Equal(got, want) {
		t.Errorf("endpoints = %v, want %v", got, want)
	}
	if !eps[0].IsLocal || !eps[0].Ready || eps[1].Ready || eps[2].IsLocal || eps[2].Zone != "z2" || eps[2].Hostname != "web-1" {
		t.Errorf("endpoint details wrong: %+v", eps)
	}
	if _, eps := snap.Port(dns); !slices.Equal(epStrings(eps), []string{"10.244.1.10:5353", "10.244.1.2:5353"}) {
		t.Errorf("dns endpoints = %v", epStrings(eps))
	}

	// Nothing new: same snapshot, no changes.
	again, ch := tr.Snapshot()
	if again != snap || !ch.Empty() {
		t.Errorf("second snapshot changed: %v", ch)
	}
}

func TestMergeDedupesAcrossSlices(t *testing.T) {
	tr := newTracker("node-a")
	tr.OnServiceAdd(Service("ns", "web", "10.96.0.10", Port("http", tcp, 80, 0)))
	// The same endpoint in two slices (the controller moving it): the
	// first slice by name wins unless a later copy is local.
	tr.OnEndpointSliceAdd(Slice("ns", "web", "a", SlicePort("http", tcp, 8080),
		Endpoint("10.244.1.5", "node-b", Zone("first"))))
	tr.OnEndpointSliceAdd(Slice("ns", "web", "b", SlicePort("http", tcp, 8080),
		Endpoint("10.244.1.5", "node-c", Zone("second")),
		Endpoint("10.244.1.6", "node-c")))
	tr.OnEndpointSliceAdd(Slice("ns", "web", "c", SlicePort("http", tcp, 8080),
		Endpoint("10.244.1.6", "node-a", Zone("local"))))
	snap, _ := tr.Snapshot()
	_, eps := snap.Port(spn("ns", "web", "http", tcp))
	if len(eps) != 2 {
		t.Fatalf("endpoints = %v", epStrings(eps))
	}
	if eps[0].Zone != "first" || eps[1].Zone != "local" || !eps[1].IsLocal {
		t.Errorf("dedupe kept the wrong copies: %+v", eps)
	}
	if got := tr.BadInputCounts(); len(got) != 0 {
		t.Errorf("cross-slice duplicates are normal, not bad input: %v", got)
	}
}

func TestConditions(t *testing.T) {
	tr := newTracker("")
	tr.OnServiceAdd(Service("ns", "web", "10.96.0.10", Port("http", tcp, 80, 0)))
	s := Slice("ns", "web", "a", SlicePort("http", tcp, 8080),
		Endpoint("10.0.0.1", ""), Endpoint("10.0.0.2", "", Terminating(true)),
		Endpoint("10.0.0.3", "", Terminating(false)), Endpoint("10.0.0.4", ""))
	// nil conditions: ready, and serving defers to ready.
	s.Endpoints[3].Conditions = discovery.EndpointConditions{}
	tr.OnEndpointSliceAdd(s)
	snap, _ := tr.Snapshot()
	_, eps := snap.Port(spn("ns", "web", "http", tcp))
	type cond struct{ ready, serving, terminating bool }
	want := []cond{{true, true, false}, {false, true, true}, {false, false, true}, {true, true, false}}
	for i, e := range eps {
		if got := (cond{e.Ready, e.Serving, e.Terminating}); got != want[i] {
			t.Errorf("%s: got %+v, want %+v", e, got, want[i])
		}
		if e.IsLocal {
			t.Errorf("%s is local on a tracker without node", e)
		}
	}
}

func TestChangesAndDeletes(t *testing.T) {
	tr := newTracker("node-a")
	web := Service("ns", "web", "10.96.0.10", Port("http", tcp, 80, 0), ResourceVersion("1"))
	slice := Slice("ns", "web", "a", SlicePort("http", tcp, 8080), Endpoint("10.0.0.1", "n"), SliceResourceVersion("1"))
	tr.OnServiceAdd(web)
	tr.OnServiceAdd(Service("ns", "other", "10.96.0.11", Port("http", tcp, 80, 0)))
	tr.OnEndpointSliceAdd(slice)
	first, _ := tr.Snapshot()

	// A resync (same resource version) is not even an event.
	tr.OnServiceUpdate(web, web)
	tr.OnEndpointSliceUpdate(slice, slice)
	if tr.Pending() {
		t.Error("resync left pending work")
	}
	// A rewrite with identical content is an event, but no change.
	slice2 := slice.DeepCopy()
	slice2.ResourceVersion = "2"
	tr.OnEndpointSliceUpdate(slice, slice2)
	if s, ch := tr.Snapshot(); s != first || !ch.Empty() {
		t.Errorf("identical rewrite changed something: %v", ch)
	}

	// Changing the protocol of a port removes one ServicePortName and adds
	// another.
	web2 := Service("ns", "web", "10.96.0.10", Port("http", udp, 80, 0), ResourceVersion("2"))
	tr.OnServiceUpdate(web, web2)
	second, ch := tr.Snapshot()
	want := map[svcstate.ServicePortName]struct{}{spn("ns", "web", "http", tcp): {}, spn("ns", "web", "http", udp): {}}
	if !mapsEqualKeys(ch.Ports, want) {
		t.Errorf("changed ports = %v, want %v", ch.Ports, want)
	}
	if p, _ := second.Port(spn("ns", "web", "http", udp)); p == nil {
		t.Error("udp port missing")
	}
	// Unchanged services are shared between snapshots, not copied.
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	if first.Service(other) != second.Service(other) {
		t.Error("unchanged service was copied")
	}
	// The older snapshot is untouched.
	if p, _ := first.Port(spn("ns", "web", "http", tcp)); p == nil {
		t.Error("old snapshot was modified")
	}

	tr.OnEndpointSliceDelete(slice2)
	third, ch := tr.Snapshot()
	if _, ok := ch.Ports[spn("ns", "web", "http", tcp)]; !ok {
		t.Errorf("slice delete: changed = %v", ch.Ports)
	}
	if _, eps := third.Port(spn("ns", "web", "http", udp)); len(eps) != 0 {
		t.Errorf("endpoints survive their slice: %v", eps)
	}

	tr.OnServiceDelete(web2)
	fourth, ch := tr.Snapshot()
	if fourth.Service(web2Name()) != nil || fourth.Len() != 1 {
		t.Errorf("service survives delete; len %d", fourth.Len())
	}
	if _, ok := ch.Ports[spn("ns", "web", "http", udp)]; !ok {
		t.Errorf("service delete: changed = %v", ch.Ports)
	}
	if third.Len() != 2 {
		t.Errorf("old snapshot len changed to %d", third.Len())
	}
}

func web2Name() types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: "web"} }

func mapsEqualKeys[K comparable](a, b map[K]struct{}) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

func TestTriggerTimes(t *testing.T) {
	tr := newTracker("")
	tr.OnServiceAdd(Service("ns", "web", "10.96.0.10", Port("http", tcp, 80, 0)))
	tr.Snapshot()
	// Without the annotation the arrival time counts; with several events
	// the earliest one does.
	tr.OnEndpointSliceAdd(Slice("ns", "web", "a", SlicePort("http", tcp, 8080), Endpoint("10.0.0.1", "")))
	tr.OnEndpointSliceAdd(Slice("ns", "web", "b", SlicePort("http", tcp, 8080), Endpoint("10.0.0.2", ""),
		TriggerTime(t0.Add(time.Hour))))
	_, ch := tr.Snapshot()
	got := ch.TriggerTimes[web2Name()]
	if !got.After(t0) || got.After(t0.Add(time.Minute)) {
		t.Errorf("trigger = %v, want the arrival time of the first event", got)
	}
	if !ch.Earliest().Equal(got) {
		t.Errorf("earliest = %v", ch.Earliest())
	}

	var merged svcstate.Changes
	merged.Merge(ch)
	merged.Merge(svcstate.Changes{TriggerTimes: map[types.NamespacedName]time.Time{web2Name(): got.Add(-time.Second)}})
	if !merged.Earliest().Equal(got.Add(-time.Second)) || len(merged.Ports) != 1 {
		t.Errorf("merge: %+v", merged)
	}
}

func TestSliceRelabelled(t *testing.T) {
	tr := newTracker("")
	tr.OnServiceAdd(Service("ns", "a", "10.96.0.10", Port("http", tcp, 80, 0)))
	tr.OnServiceAdd(Service("ns", "b", "10.96.0.11", Port("http", tcp, 80, 0)))
	s := Slice("ns", "a", "s1", SlicePort("http", tcp, 8080), Endpoint("10.0.0.1", ""), SliceResourceVersion("1"))
	tr.OnEndpointSliceAdd(s)
	tr.Snapshot()
	s2 := s.DeepCopy()
	s2.Labels[discovery.LabelServiceName] = "b"
	s2.ResourceVersion = "2"
	tr.OnEndpointSliceUpdate(s, s2)
	snap, ch := tr.Snapshot()
	if _, eps := snap.Port(spn("ns", "a", "http", tcp)); len(eps) != 0 {
		t.Errorf("a keeps %v", epStrings(eps))
	}
	if _, eps := snap.Port(spn("ns", "b", "http", tcp)); len(eps) != 1 {
		t.Errorf("b has %v", epStrings(eps))
	}
	if len(ch.Ports) != 2 {
		t.Errorf("changed = %v", ch.Ports)
	}
}

func TestHeadlessAndExternalName(t *testing.T) {
	tr := newTracker("")
	tr.OnServiceAdd(Service("ns", "db", "None"))
	tr.OnServiceAdd(Service("ns", "ext", "", Type(v1.ServiceTypeExternalName), Port("http", tcp, 80, 0)))
	tr.OnEndpointSliceAdd(Slice("ns", "db", "db-1", Endpoint("10.0.0.1", "", Hostname("db-0"))))
	snap, ch := tr.Snapshot()
	db := snap.Service(types.NamespacedName{Namespace: "ns", Name: "db"})
	if db == nil || !db.Headless || len(db.Ports) != 0 {
		t.Fatalf("db = %+v", db)
	}
	if eps := db.Endpoints(svcstate.ServicePortName{NamespacedName: db.Name}); len(eps) != 1 || eps[0].Hostname != "db-0" {
		t.Errorf("portless endpoints = %+v", eps)
	}
	if len(ch.Services) != 2 {
		t.Errorf("changed services = %v", ch.Services)
	}
	ext := snap.Service(types.NamespacedName{Namespace: "ns", Name: "ext"})
	if ext.Ports[0].Proxied() {
		t.Error("ExternalName port is proxied")
	}
}

func TestBadInput(t *testing.T) {
	type tc struct {
		name    string
		objects []any
		reasons map[svcstate.Reason]uint64
		// what must still be there
		port svcstate.ServicePortName
		eps  []string
	}
	http := spn("ns", "web", "http", tcp)
	good := Service("ns", "web", "10.96.0.10", Port("http", tcp, 80, 0))
	cases := []tc{
		{
			name: "malformed, special and out-of-family endpoint IPs",
			objects: []any{good, Slice("ns", "web", "a", SlicePort("http", tcp, 8080),
				Endpoint("10.0.0.1", ""), Endpoint("10.0.0.256", ""), Endpoint("fd00::1", ""),
				Endpoint("127.0.0.1", ""), Endpoint("169.254.169.254", ""), Endpoint("010.0.0.2", ""),
				Endpoint("::ffff:10.0.0.3", ""), Endpoint("0.0.0.0", ""))},
			reasons: map[svcstate.Reason]uint64{svcstate.ReasonMalformedIP: 3, svcstate.ReasonWrongFamily: 1, svcstate.ReasonSpecialIP: 3},
			port:    http, eps: []string{"10.0.0.1:8080"},
		},
		{
			name: "duplicate endpoints and ports within a slice",
			objects: []any{good, Slice("ns", "web", "a", SlicePort("http", tcp, 8080), SlicePort("http", tcp, 9090),
				Endpoint("10.0.0.1", ""), Endpoint("10.0.0.1", "", NotReady()))},
			reasons: map[svcstate.Reason]uint64{svcstate.ReasonDuplicate: 2},
			port:    http, eps: []string{"10.0.0.1:8080"},
		},
		{
			name: "slice ports out of range or of unknown protocol",
			objects: []any{good, Slice("ns", "web", "a", SlicePort("http", tcp, 0), SlicePort("http", tcp, 70000),
				SlicePort("http", "ICMP", 8080), SlicePort("http", tcp, 8080), Endpoint("10.0.0.1", ""))},
			reasons: map[svcstate.Reason]uint64{svcstate.ReasonPortOutOfRange: 2, svcstate.ReasonUnknownProtocol: 1},
			port:    http, eps: []string{"10.0.0.1:8080"},
		},
		{
			name: "slice without service label or address, or of an unknown address type",
			objects: []any{good,
				func() *discovery.EndpointSlice {
					s := Slice("ns", "web", "orphan", SlicePort("http", tcp, 8080), Endpoint("10.0.0.9", ""))
					delete(s.Labels, discovery.LabelServiceName)
					return s
				}(),
				Slice("ns", "web", "weird", AddressType("IPv5"), SlicePort("http", tcp, 8080), Endpoint("10.0.0.8", "")),
				Slice("ns", "web", "fqdn", AddressType(discovery.AddressTypeFQDN), SlicePort("http", tcp, 8080), Endpoint("example.com", "")),
				func() *discovery.EndpointSlice {
					s := Slice("ns", "web", "a", SlicePort("http", tcp, 8080), Endpoint("10.0.0.1", ""), Endpoint("10.0.0.2", ""))
					s.Endpoints[1].Addresses = nil
					return s
				}()},
			reasons: map[svcstate.Reason]uint64{svcstate.ReasonMissingServiceName: 1, svcstate.ReasonUnknownAddressType: 1, svcstate.ReasonMissingAddress: 1},
			port:    http, eps: []string{"10.0.0.1:8080"},
		},
		{
			name: "service ports out of range, unknown protocol, duplicates",
			objects: []any{Service("ns", "web", "10.96.0.10", Port("http", tcp, 80, 70000), Port("big", tcp, 65536, 0),
				Port("icmp", "ICMP", 7, 0), Port("http", tcp, 81, 0), Port("again", tcp, 80, 0)),
				Slice("ns", "web", "a", SlicePort("http", tcp, 8080), Endpoint("10.0.0.1", ""))},
			reasons: map[svcstate.Reason]uint64{svcstate.ReasonPortOutOfRange: 2, svcstate.ReasonUnknownProtocol: 1, svcstate.ReasonDuplicate: 2},
			port:    http, eps: []string{"10.0.0.1:8080"},
		},
		{
			name: "bad service addresses",
			objects: []any{Service("ns", "web", "10.96.0.10", Port("http", tcp, 80, 0),
				ClusterIPs("10.96.0.10", "banana", "10.96.0.11"),
				ExternalIPs("1.2.3.4", "1.2.3.4", "nope"), LoadBalancer("5.6.7.8", "224.0.0.1"),
				SourceRanges("10.0.0.0/8", "10.0.0.0/33"), Affinity(0)),
				Slice("ns", "web", "a", SlicePort("http", tcp, 8080), Endpoint("10.0.0.1", ""))},
			reasons: map[svcstate.Reason]uint64{svcstate.ReasonMalformedIP: 2, svcstate.ReasonDuplicate: 2,
				svcstate.ReasonSpecialIP: 1, svcstate.ReasonMalformedCIDR: 1, svcstate.ReasonBadAffinityTimeout: 1},
			port: http, eps: []string{"10.0.0.1:8080"},
		},
		{
			name: "LoadBalancer with Local policy but no health check port",
			objects: []any{Service("ns", "web", "10.96.0.10", Port("http", tcp, 80, 30080), LoadBalancer("5.6.7.8"), ExternalLocal(0)),
				Slice("ns", "web", "a", SlicePort("http", tcp, 8080), Endpoint("10.0.0.1", ""))},
			reasons: map[svcstate.Reason]uint64{svcstate.ReasonMissingHealthCheck: 1},
			port:    http, eps: []string{"10.0.0.1:8080"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var seen []svcstate.BadInput
			tr := svcstate.NewTracker(svcstate.Config{
				Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
				OnBadInput: func(b svcstate.BadInput) { seen = append(seen, b) },
			})
			// A healthy neighbour must be unaffected.
			tr.OnServiceAdd(Service("ns", "neighbour", "10.96.0.99", Port("http", tcp, 80, 0)))
			tr.OnEndpointSliceAdd(Slice("ns", "neighbour", "n", SlicePort("http", tcp, 8080), Endpoint("10.1.0.1", "")))
			for _, o := range c.objects {
				switch o := o.(type) {
				case *v1.Service:
					tr.OnServiceAdd(o)
				case *discovery.EndpointSlice:
					tr.OnEndpointSliceAdd(o)
				}
			}
			snap, _ := tr.Snapshot()
			if got := tr.BadInputCounts(); !equalCounts(got, c.reasons) {
				t.Errorf("counts = %v, want %v (%+v)", got, c.reasons, seen)
			}
			var total uint64
			for _, n := range c.reasons {
				total += n
			}
			if uint64(len(seen)) != total {
				t.Errorf("OnBadInput called %d times, want %d", len(seen), total)
			}
			if p, eps := snap.Port(c.port); p == nil || !slices.Equal(epStrings(eps), c.eps) {
				t.Errorf("port %v = %+v with %v, want endpoints %v", c.port, p, epStrings(eps), c.eps)
			}
			if _, eps := snap.Port(spn("ns", "neighbour", "http", tcp)); len(eps) != 1 {
				t.Errorf("neighbour affected: %v", epStrings(eps))
			}
		})
	}
}

func equalCounts(a, b map[svcstate.Reason]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestBadServiceAddressesKeepsTheRest(t *testing.T) {
	tr := newTracker("")
	tr.OnServiceAdd(Service("ns", "web", "10.96.0.10", Port("http", tcp, 80, 0),
		ExternalIPs("1.2.3.4", "nope"), LoadBalancer("5.6.7.8"), SourceRanges("bad")))
	snap, _ := tr.Snapshot()
	p, _ := snap.Port(spn("ns", "web", "http", tcp))
	if len(p.ExternalIPs) != 1 || len(p.LoadBalancerIPs) != 1 {
		t.Errorf("port = %+v", p)
	}
	// Every source range was unusable: the restriction stays, so the load
	// balancer fails closed.
	if !p.SourceRangesSet || len(p.LoadBalancerSourceRanges) != 0 {
		t.Errorf("source ranges = %v set=%v", p.LoadBalancerSourceRanges, p.SourceRangesSet)
	}
}

func TestServicePortPolicies(t *testing.T) {
	tr := newTracker("")
	tr.OnServiceAdd(Service("ns", "np", "10.96.0.1", Port("p", tcp, 80, 30080), Type(v1.ServiceTypeNodePort), ExternalLocal(0)))
	tr.OnServiceAdd(Service("ns", "ci", "10.96.0.2", Port("p", tcp, 80, 0), ExternalLocal(0), InternalLocal()))
	tr.OnServiceAdd(Service("ns", "lb", "10.96.0.3", Port("p", tcp, 80, 30081), LoadBalancer("5.6.7.8"), ExternalLocal(30900),
		SourceRanges("192.168.0.0/16", "2001:db8::/32", "10.1.2.3/8")))
	tr.OnServiceAdd(Service("ns", "ds", "10.96.0.4", Port("p", tcp, 80, 0), ClusterIPs("10.96.0.4", "fd00::4"), ExternalIPs("fd00:1::1")))
	snap, _ := tr.Snapshot()

	np, _ := snap.Port(spn("ns", "np", "p", tcp))
	if !np.ExternalPolicyLocal || !np.UsesClusterEndpoints() || !np.UsesLocalEndpoints() || np.HealthCheckNodePort != 0 {
		t.Errorf("np = %+v", np)
	}
	// externalTrafficPolicy means nothing on a plain ClusterIP service.
	ci, _ := snap.Port(spn("ns", "ci", "p", tcp))
	if ci.ExternalPolicyLocal || !ci.InternalPolicyLocal || ci.UsesClusterEndpoints() || !ci.UsesLocalEndpoints() {
		t.Errorf("ci = %+v", ci)
	}
	lb, _ := snap.Port(spn("ns", "lb", "p", tcp))
	if lb.HealthCheckNodePort != 30900 || len(lb.LoadBalancerSourceRanges) != 3 ||
		lb.LoadBalancerSourceRanges[2] != netip.MustParsePrefix("10.0.0.0/8") {
		t.Errorf("lb = %+v", lb)
	}
	if v4 := lb.ForFamily(v1.IPv4Protocol); len(v4.LoadBalancerSourceRanges) != 2 || !v4.SourceRangesSet {
		t.Errorf("lb v4 = %+v", v4)
	}
	ds, _ := snap.Port(spn("ns", "ds", "p", tcp))
	v4, v6 := ds.ForFamily(v1.IPv4Protocol), ds.ForFamily(v1.IPv6Protocol)
	if len(v4.ClusterIPs) != 1 || len(v4.ExternalIPs) != 0 || v4.ExternallyAccessible() {
		t.Errorf("ds v4 = %+v", v4)
	}
	if v6.ClusterIP(v1.IPv6Protocol) != netip.MustParseAddr("fd00::4") || !v6.ExternallyAccessible() {
		t.Errorf("ds v6 = %+v", v6)
	}
	if v4.ClusterIP(v1.IPv6Protocol).IsValid() {
		t.Error("v4 view has a v6 cluster IP")
	}
	if lb4 := lb.ForFamily(v1.IPv4Protocol); lb4 == lb {
		t.Error("ForFamily returned the shared value although it dropped ranges")
	}
	if np.ForFamily(v1.IPv4Protocol) != np {
		t.Error("ForFamily copied a single-family port")
	}
}

func TestHintsAndIPv6(t *testing.T) {
	tr := newTracker("node-a")
	tr.OnServiceAdd(Service("ns", "web", "fd00::10", Port("http", tcp, 80, 0)))
	tr.OnEndpointSliceAdd(Slice("ns", "web", "a", AddressType(discovery.AddressTypeIPv6), SlicePort("http", tcp, 8080),
		Endpoint("fd00:1::2", "node-a", ZoneHints("z2", "z1", "z1"), NodeHints("node-a"))))
	snap, _ := tr.Snapshot()
	_, eps := snap.Port(spn("ns", "web", "http", tcp))
	if len(eps) != 1 || eps[0].String() != "[fd00:1::2]:8080" || !slices.Equal(eps[0].ZoneHints, []string{"z1", "z2"}) ||
		!slices.Equal(eps[0].NodeHints, []string{"node-a"}) {
		t.Errorf("eps = %+v", eps)
	}
}

func TestSortedAndAll(t *testing.T) {
	tr := newTracker("")
	for i := range 50 {
		tr.OnServiceAdd(Service(fmt.Sprintf("ns%d", i%3), fmt.Sprintf("svc%02d", i), fmt.Sprintf("10.96.1.%d", i+1), Port("p", tcp, 80, 0)))
	}
	snap, _ := tr.Snapshot()
	sorted := snap.Sorted()
	if len(sorted) != 50 || snap.Len() != 50 {
		t.Fatalf("len = %d", len(sorted))
	}
	for i := 1; i < len(sorted); i++ {
		a, b := sorted[i-1].Name, sorted[i].Name
		if a.Namespace > b.Namespace || (a.Namespace == b.Namespace && a.Name >= b.Name) {
			t.Fatalf("not sorted: %v before %v", a, b)
		}
	}
	n := 0
	for range snap.All {
		n++
		if n == 10 {
			break
		}
	}
	if n != 10 {
		t.Errorf("early break: %d", n)
	}
}

// TestSliceVersion: a snapshot carries the newest slice version among
// the events it includes — other families' slices and deletions too, and
// when nothing changed — and never moves back.
func TestSliceVersion(t *testing.T) {
	v4 := svcstate.NewTracker(svcstate.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Family: v1.IPv4Protocol})
	v4.OnServiceAdd(Service("ns", "web", "10.96.0.10", Port("http", tcp, 80, 0)))
	v4.Snapshot()
	web := func(rv string, opts ...SliceOption) *discovery.EndpointSlice {
		return Slice("ns", "web", "web-1", append([]SliceOption{SlicePort("http", tcp, 8080), SliceResourceVersion(rv)}, opts...)...)
	}
	steps := []struct {
		name  string
		event func()
		want  uint64
		moved bool // the snapshot changed
	}{
		{"nothing yet", func() {}, 0, false},
		{"a slice", func() { v4.OnEndpointSliceAdd(web("7", Endpoint("10.0.0.1", "n"))) }, 7, true},
		{"another family's slice", func() {
			v4.OnEndpointSliceAdd(Slice("ns", "web", "web-6", AddressType(discovery.AddressTypeIPv6),
				SlicePort("http", tcp, 8080), SliceResourceVersion("9"), Endpoint("fd00::1", "n")))
		}, 9, false},
		{"the same endpoints again", func() { v4.OnEndpointSliceUpdate(web("7"), web("11", Endpoint("10.0.0.1", "n"))) }, 11, false},
		{"an older version", func() { v4.OnEndpointSliceUpdate(nil, web("10", Endpoint("10.0.0.1", "n"))) }, 11, false},
		{"a version that is no number", func() { v4.OnEndpointSliceUpdate(nil, web("x1", Endpoint("10.0.0.1", "n"))) }, 11, false},
		{"a deletion", func() { v4.OnEndpointSliceDelete(web("12")) }, 12, true},
	}
	for _, s := range steps {
		before := v4.Current()
		s.event()
		snap, ch := v4.Snapshot()
		if ch.SliceVersion != s.want {
			t.Errorf("%s: SliceVersion %d, want %d", s.name, ch.SliceVersion, s.want)
		}
		if moved := snap != before; moved != s.moved {
			t.Errorf("%s: snapshot changed %v, want %v", s.name, moved, s.moved)
		}
	}
	var merged svcstate.Changes
	merged.Merge(svcstate.Changes{SliceVersion: 5})
	merged.Merge(svcstate.Changes{SliceVersion: 3})
	if merged.SliceVersion != 5 || !merged.Empty() {
		t.Errorf("merged %d (empty %v), want 5 and empty: a version alone is no change", merged.SliceVersion, merged.Empty())
	}
}

// TestOnVersion: a slice of another family brings only a version, so the
// tracker calls OnVersion, not OnChange (which would hold the next change
// back by the runner's minimum interval); its own family's slices, and
// one that leaves the family, call OnChange; without OnVersion, OnChange.
func TestOnVersion(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	v6slice := func(rv string) *discovery.EndpointSlice {
		return Slice("ns", "web", "web-6", AddressType(discovery.AddressTypeIPv6), SlicePort("http", tcp, 8080),
			SliceResourceVersion(rv), Endpoint("fd00::1", "n"))
	}
	v4slice := func(name, rv string) *discovery.EndpointSlice {
		return Slice("ns", "web", name, SlicePort("http", tcp, 8080), SliceResourceVersion(rv), Endpoint("10.0.0.1", "n"))
	}
	for _, withHook := range []bool{true, false} {
		var changes, versions int
		cfg := svcstate.Config{Logger: quiet, Family: v1.IPv4Protocol, OnChange: func() { changes++ }}
		if withHook {
			cfg.OnVersion = func() { versions++ }
		}
		tr := svcstate.NewTracker(cfg)
		steps := []struct {
			name              string
			event             func()
			changes, versions int
		}{
			{"another family's slice", func() { tr.OnEndpointSliceAdd(v6slice("2")) }, 0, 1},
			{"its deletion", func() { tr.OnEndpointSliceDelete(v6slice("3")) }, 0, 1},
			{"a slice of the family", func() { tr.OnEndpointSliceAdd(v4slice("web-4", "4")) }, 1, 0},
			{"that slice leaving the family", func() {
				moved := v6slice("5")
				moved.Name = "web-4"
				tr.OnEndpointSliceUpdate(v4slice("web-4", "4"), moved)
			}, 1, 0},
		}
		for _, s := range steps {
			changes, versions = 0, 0
			s.event()
			wantC, wantV := s.changes, s.versions
			if !withHook {
				wantC, wantV = s.changes+s.versions, 0
			}
			if changes != wantC || versions != wantV {
				t.Errorf("OnVersion set %v, %s: OnChange %d, OnVersion %d times; want %d, %d", withHook, s.name, changes, versions, wantC, wantV)
			}
		}
	}
}
