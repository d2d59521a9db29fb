package nodecache

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/internal/dns/forward"
	"github.com/svcnet/svcnet/internal/dns/resolver"
	"github.com/svcnet/svcnet/internal/dns/server"
	"github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/svcstate"
	st "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

func TestParse(t *testing.T) {
	ok := Defaults()
	ok.Kubeconfig, ok.ClusterDNS = "/k", "10.96.0.10"
	cases := []struct {
		name   string
		change func(*Options)
		err    string // "" for none
	}{
		{"defaults with the required flags", func(*Options) {}, ""},
		{"no kubeconfig", func(o *Options) { o.Kubeconfig = "" }, "--kubeconfig"},
		{"wildcard listen", func(o *Options) { o.Listen = "0.0.0.0:53" }, "--listen"},
		{"listen without port", func(o *Options) { o.Listen = "169.254.20.10" }, "--listen"},
		{"service without namespace", func(o *Options) { o.Service = "kube-dns" }, "--service"},
		{"no cluster DNS", func(o *Options) { o.ClusterDNS = "" }, "--cluster-dns"},
		{"zero timeout", func(o *Options) { o.Timeout = 0 }, "--upstream-timeout"},
	}
	for _, tc := range cases {
		o := ok
		tc.change(&o)
		c, err := o.parse()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err == "" && c.fallback != "10.96.0.10:53":
			t.Errorf("%s: fallback %q", tc.name, c.fallback)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.err)
		}
	}
}

func TestUpstreams(t *testing.T) {
	dnsSvc := st.Service("kube-system", "kube-dns", "10.96.0.10",
		st.Port("dns", v1.ProtocolUDP, 53, 0), st.Port("dns-tcp", v1.ProtocolTCP, 53, 0), st.Port("metrics", v1.ProtocolTCP, 9153, 0))
	ports := []st.SliceOption{st.SlicePort("dns", v1.ProtocolUDP, 53), st.SlicePort("dns-tcp", v1.ProtocolTCP, 1053), st.SlicePort("metrics", v1.ProtocolTCP, 9153)}
	slice := func(eps ...st.SliceOption) []st.SliceOption { return append(slices.Clone(ports), eps...) }
	cases := []struct {
		name  string
		svc   *v1.Service
		slice []st.SliceOption
		want  []string
	}{
		{"ready replicas, by their TCP DNS port", dnsSvc, slice(st.Endpoint("10.244.1.3", "n1"), st.Endpoint("10.244.0.2", "n2")),
			[]string{"10.244.0.2:1053", "10.244.1.3:1053"}},
		{"a dead replica left out", dnsSvc, slice(st.Endpoint("10.244.1.3", "n1", st.NotReady()), st.Endpoint("10.244.0.2", "n2")),
			[]string{"10.244.0.2:1053"}},
		{"only terminating ones: those still serving", dnsSvc, slice(st.Endpoint("10.244.1.3", "n1", st.Terminating(true)), st.Endpoint("10.244.0.2", "n2", st.Terminating(false))),
			[]string{"10.244.1.3:1053"}},
		{"no endpoints", dnsSvc, nil, nil},
		{"no TCP port", st.Service("kube-system", "kube-dns", "10.96.0.10", st.Port("dns", v1.ProtocolUDP, 53, 0)),
			slice(st.Endpoint("10.244.0.2", "n2")), nil},
	}
	for _, tc := range cases {
		tr := svcstate.NewTracker(svcstate.Config{})
		tr.OnServiceAdd(tc.svc)
		if tc.slice != nil {
			tr.OnEndpointSliceAdd(st.Slice("kube-system", "kube-dns", "kube-dns-1", tc.slice...))
		}
		snap, _ := tr.Snapshot()
		if got := Upstreams(snap.Service(types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"})); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := Upstreams(nil); got != nil {
		t.Errorf("no Service: %v", got)
	}
	if got := choose(nil, "10.96.0.10:53"); !slices.Equal(got, []string{"10.96.0.10:53"}) {
		t.Errorf("no endpoints: %v, want the ClusterIP", got)
	}
}

// TestSetup runs in a network namespace of its own: the address lands on
// lo once, the NOTRACK rules once however often Setup runs, and a cache
// listening there answers from a replica, the answers carrying no
// conntrack entry.
func TestSetup(t *testing.T) {
	ns := netnstest.New(t, "nodecache")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr := netip.MustParseAddr(DefaultAddress)
	ex := &iptables.Exec{Binary: "iptables", Netns: ns}
	for range 2 {
		if err := netns.Do(ns, func() error { return Setup(ctx, addr, 53, ex) }); err != nil {
			t.Fatal(err)
		}
	}
	var addrs []netlink.Addr
	if err := netns.Do(ns, func() error {
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			addrs, err = netlink.AddrList(lo, netlink.FAMILY_V4)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(addrs, func(a netlink.Addr) bool { return a.IP.Equal(addr.AsSlice()) }) {
		t.Errorf("lo has %v, want %s", addrs, addr)
	}
	save, err := ex.Save(ctx, "raw")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(save), "-j NOTRACK"); n != 4 {
		t.Errorf("%d NOTRACK rules after two setups, want 4 (UDP and TCP, in and out):\n%s", n, save)
	}

	// The cache on the link-local address (its sockets in the namespace);
	// the replica on loopback, where this process's own dials go.
	replica := dnstest.StartUpstream(t)
	replica.Add(t, "kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1")
	fwd, err := forward.New(forward.Options{Upstreams: []string{replica.Addr}, TCP: true, Spread: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fwd.Close)
	srv, err := server.New(server.Options{Upstream: fwd, Resolver: resolver.Config{ForwardAll: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := netns.Do(ns, func() error { return srv.Listen(net.JoinHostPort(DefaultAddress, "53")) }); err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx) }()
	t.Cleanup(func() { stop(); <-served })

	conn, err := netns.DialContext(ctx, ns, "udp", net.JoinHostPort(DefaultAddress, "53"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	q := new(dns.Msg)
	q.SetQuestion("kubernetes.default.svc.cluster.local.", dns.TypeA)
	dc := &dns.Conn{Conn: conn}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if err := dc.WriteMsg(q); err != nil {
		t.Fatal(err)
	}
	r, err := dc.ReadMsg()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answer) != 1 || replica.TCPQueries() != 1 {
		t.Fatalf("answer %v, replica asked %d times over TCP; want the replica's answer over TCP", r.Answer, replica.TCPQueries())
	}
	// The query passed the NOTRACK rule: its packet counter moved.
	save, err = ex.Save(ctx, "raw")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(save), "svcnet node-local DNS") {
		t.Fatalf("rules gone:\n%s", save)
	}
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "iptables-save", "-c", "-t", "raw").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables-save: %v: %s", err, out)
	}
	counted := false
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "-A PREROUTING") && strings.Contains(l, "-p udp") && strings.Contains(l, "NOTRACK") {
			counted = !strings.HasPrefix(l, "[0:0]")
		}
	}
	if !counted {
		t.Errorf("the UDP query did not pass the NOTRACK rule:\n%s", out)
	}
}
