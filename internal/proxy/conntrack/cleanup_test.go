package conntrack_test

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/conntrack"
	"github.com/svcnet/svcnet/internal/proxy/proxytest"
	. "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

var (
	udp  = v1.ProtocolUDP
	tcp  = v1.ProtocolTCP
	node = proxy.Node{Name: "node-a"}
)

func dnsService(opts ...ServiceOption) *v1.Service {
	return Service("kube-system", "dns", "10.96.0.10", append([]ServiceOption{Port("dns", udp, 53, 0), Port("dns-tcp", tcp, 53, 0)}, opts...)...)
}

func dnsSlice(eps ...SliceOption) any {
	return Slice("kube-system", "dns", "dns-1", append([]SliceOption{SlicePort("dns", udp, 5353), SlicePort("dns-tcp", tcp, 5353)}, eps...)...)
}

func TestPlan(t *testing.T) {
	ep := func(ip string, opts ...EndpointOption) SliceOption { return Endpoint(ip, "node-b", opts...) }
	cases := []struct {
		name          string
		before, after []any
		deleted       bool // the service is deleted after the before objects
		want          []string
	}{
		{name: "endpoint removed: entries to it from the cluster IP go",
			before: []any{dnsService(), dnsSlice(ep("10.244.1.2"), ep("10.244.2.2"))},
			after:  []any{dnsService(), dnsSlice(ep("10.244.1.2"))},
			want:   []string{"nat tcp 10.96.0.10 -> 10.244.2.2", "nat udp 10.96.0.10 -> 10.244.2.2"}},
		{name: "endpoint turned unready",
			before: []any{dnsService(), dnsSlice(ep("10.244.1.2"), ep("10.244.2.2"))},
			after:  []any{dnsService(), dnsSlice(ep("10.244.1.2"), ep("10.244.2.2", NotReady()))},
			want:   []string{"nat tcp 10.96.0.10 -> 10.244.2.2", "nat udp 10.96.0.10 -> 10.244.2.2"}},
		{name: "endpoint added: nothing is stale",
			before: []any{dnsService(), dnsSlice(ep("10.244.1.2"))},
			after:  []any{dnsService(), dnsSlice(ep("10.244.1.2"), ep("10.244.2.2"))},
			want:   nil},
		{name: "first endpoint: what went nowhere is forgotten",
			before: []any{dnsService()},
			after:  []any{dnsService(), dnsSlice(ep("10.244.1.2"))},
			want:   []string{"ip udp 10.96.0.10"}},
		{name: "node port, external IP and load balancer: every address and the node port",
			before: []any{dnsService(Type(v1.ServiceTypeNodePort), ExternalIPs("203.0.113.9"), LoadBalancer("198.51.100.1"),
				func(s *v1.Service) { s.Spec.Ports[0].NodePort = 30053 }),
				dnsSlice(ep("10.244.1.2"), ep("10.244.2.2"))},
			after: []any{dnsService(Type(v1.ServiceTypeNodePort), ExternalIPs("203.0.113.9"), LoadBalancer("198.51.100.1"),
				func(s *v1.Service) { s.Spec.Ports[0].NodePort = 30053 }),
				dnsSlice(ep("10.244.1.2"))},
			want: []string{"nat tcp 10.96.0.10 -> 10.244.2.2", "nat tcp 198.51.100.1 -> 10.244.2.2", "nat tcp 203.0.113.9 -> 10.244.2.2",
				"nat udp 10.96.0.10 -> 10.244.2.2", "nat udp 198.51.100.1 -> 10.244.2.2",
				"nat udp 203.0.113.9 -> 10.244.2.2", "portnat udp 30053 -> 10.244.2.2"}},
		{name: "service deleted: all its endpoints are stale",
			before:  []any{dnsService(), dnsSlice(ep("10.244.1.2"), ep("10.244.2.2"))},
			deleted: true,
			want: []string{"nat tcp 10.96.0.10 -> 10.244.1.2", "nat tcp 10.96.0.10 -> 10.244.2.2",
				"nat udp 10.96.0.10 -> 10.244.1.2", "nat udp 10.96.0.10 -> 10.244.2.2"}},
		{name: "TCP endpoint removed: its unanswered entries go",
			before: []any{Service("default", "web", "10.96.0.20", Port("http", tcp, 80, 30080), Type(v1.ServiceTypeNodePort)),
				Slice("default", "web", "web-1", SlicePort("http", tcp, 8080), ep("10.244.1.2"), ep("10.244.1.3"))},
			after: []any{Service("default", "web", "10.96.0.20", Port("http", tcp, 80, 30080), Type(v1.ServiceTypeNodePort)),
				Slice("default", "web", "web-1", SlicePort("http", tcp, 8080), ep("10.244.1.3"))},
			want: []string{"nat tcp 10.96.0.20 -> 10.244.1.2", "portnat tcp 30080 -> 10.244.1.2"}},
		{name: "TCP's first endpoint: nothing (a SYN without endpoints is rejected)",
			before: []any{Service("default", "web", "10.96.0.20", Port("http", tcp, 80, 0))},
			after: []any{Service("default", "web", "10.96.0.20", Port("http", tcp, 80, 0)),
				Slice("default", "web", "web-1", SlicePort("http", tcp, 8080), ep("10.244.1.2"))},
			want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := proxytest.QuietTracker()
			proxytest.Feed(tr, tc.before)
			prev, _ := tr.Snapshot()
			if tc.deleted {
				tr.OnServiceDelete(tc.before[0].(*v1.Service))
			}
			proxytest.Feed(tr, tc.after)
			cur, ch := tr.Snapshot()
			plan := conntrack.Plan(prev, cur, ch.Ports, node, v1.IPv4Protocol)
			fake := &conntrack.Fake{}
			if _, err := fake.Delete(context.Background(), plan, v1.IPv4Protocol); err != nil {
				t.Fatal(err)
			}
			if got := fake.Calls(); !slices.Equal(got, tc.want) {
				t.Errorf("calls:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestFirstSyncCleansNothing(t *testing.T) {
	tr := proxytest.QuietTracker()
	proxytest.Feed(tr, []any{dnsService(), dnsSlice(Endpoint("10.244.1.2", "node-b"))})
	cur, ch := tr.Snapshot()
	if plan := conntrack.Plan(nil, cur, ch.Ports, node, v1.IPv4Protocol); !plan.Empty() {
		t.Errorf("first sync plan: %+v", plan)
	}
}
