package proxy_test

import (
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

// kubeProxyPath is Kubernetes' own kube-proxy, built outside our module
// by hack/kube-proxy-build.sh (make test builds it before the tests).
func kubeProxyPath(t testing.TB) string {
	t.Helper()
	p := os.Getenv("SVCNET_KUBE_PROXY")
	if p == "" {
		p = "/var/tmp/svcnet-conformance/kube-proxy-v1.37.2"
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("kube-proxy: %v (hack/kube-proxy-build.sh builds it; make test does so first)", err)
	}
	return p
}

// The differential test's node: one address per family on a bridge of
// its own (no link leaves the namespace).
const (
	diffNode   = "node-a"
	diffNodeIP = "10.1.0.2"
	diffNode6  = "fd00:1::2"
	diffCIDR   = "10.244.0.0/16"
	diffCIDR6  = "fd00:10:244::/56"
)

// difference is one of the differences between kube-proxy's tables and
// ours that docs/architecture.md explains: an item that matches it may be
// missing from either table.
type difference struct {
	item *regexp.Regexp
	// byDesign: ours leaves out a kube-proxy feature on purpose; its
	// items do not count against the share of identical ones.
	byDesign bool
}

// documented are those differences, by mode.
var documented = map[string][]difference{
	"iptables": {
		// Node ports on 127.0.0.0/8 (kube-proxy's default in its iptables
		// mode): svcnet refuses them, so it needs no route_localnet, no
		// KUBE-FIREWALL guarding it, and leaves loopback out of the jump
		// to KUBE-NODEPORTS.
		{regexp.MustCompile(`KUBE-FIREWALL`), true},
		{regexp.MustCompile(`^nat -A KUBE-NODEPORTS -d 127\.0\.0\.0/8 .*localhost_nps_accepted_pkts`), true},
		{regexp.MustCompile(`^nat -A KUBE-SERVICES (! -d 127\.0\.0\.0/8 )?-m comment --comment "kubernetes service nodeports; NOTE`), true},
	},
}

// mustHave are items kube-proxy writes for the fixture, by mode: the
// fixture exercises them, so the comparison covers them.
var mustHave = map[string][]string{
	"nftables": {"Drop traffic to unallocated ClusterIPs", "set hairpin-connections element", "dnat ip", "to numgen random mod 3 map",
		"update @affinity-", "chain firewall-", "goto reject-chain", ": drop", "short-circuit pod traffic", "masquerade local traffic"},
	"iptables": {"KUBE-SEP-", "KUBE-FW-", "--rcheck", "KUBE-EXT-", "-j REJECT", "-j DROP", "--random-fully", "nfacct --nfacct-name  ct_state_invalid_dropped_pkts",
		"KUBE-SVL-", "has no local endpoints"},
}

// TestNFTablesAsKubeProxy runs Kubernetes' kube-proxy (v1.37.2) and
// `svcnet proxy`, both in nftables mode, in two namespaces against one
// API server holding a Service of every shape, and compares their
// kube-proxy tables item by item: every set, map and chain, every
// property, rule and element. Every difference must be a documented one,
// and at least 98% of kube-proxy's items must be in ours as they are.
func TestNFTablesAsKubeProxy(t *testing.T) { testAsKubeProxy(t, "nftables") }

// TestIPTablesAsKubeProxy is the same for the iptables mode: every chain
// and rule of iptables-save's nat, filter and mangle tables.
func TestIPTablesAsKubeProxy(t *testing.T) { testAsKubeProxy(t, "iptables") }

func testAsKubeProxy(t *testing.T, mode string) {
	bin := kubeProxyPath(t)
	for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		t.Run(string(fam), func(t *testing.T) { testFamilyAsKubeProxy(t, bin, mode, fam) })
	}
}

// dump lists what a proxy of mode wrote for fam inside ns.
func dump(ns *framework.Netns, mode string, fam v1.IPFamily) (string, []string) {
	v6 := fam == v1.IPv6Protocol
	if mode == "nftables" {
		out, _ := ns.Try("nft", "list", "table", map[bool]string{false: "ip", true: "ip6"}[v6], "kube-proxy")
		return out, nftItems(out)
	}
	out, _ := ns.Try(map[bool]string{false: "iptables-save", true: "ip6tables-save"}[v6])
	return out, iptablesItems(out)
}

func testFamilyAsKubeProxy(t *testing.T, bin, mode string, fam v1.IPFamily) {
	framework.RequireRoot(t)
	serviceRange, cidr := "10.96.0.0/16", diffCIDR
	if fam == v1.IPv6Protocol {
		serviceRange, cidr = "fd00:96::/108", diffCIDR6
	}
	api := framework.StartAPIServer(t, "--service-cluster-ip-range", serviceRange)
	client := api.Client()
	ctx := framework.Context(t, 2*time.Minute)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: diffNode}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: diffNodeIP}, {Type: v1.NodeInternalIP, Address: diffNode6}}}}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clusterIPs := createDiffFixture(t, client, fam)

	nodeNS := func(what string) *framework.Netns {
		ns := framework.NewNetns(t, what)
		ns.Bridge("br0", diffNodeIP+"/24")
		ns.IP("-6", "addr", "add", diffNode6+"/64", "dev", "br0", "nodad")
		ns.ForwardAPIServer(api)
		return ns
	}
	kpNS, ourNS := nodeNS("kube-proxy"), nodeNS("svcnet-proxy")
	kp := framework.StartCommandIn(t, kpNS, bin, "--kubeconfig", api.KubeconfigOf("proxy"), "--proxy-mode", mode,
		"--hostname-override", diffNode, "--cluster-cidr", cidr, "--conntrack-max-per-core", "0",
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256")
	ours := framework.StartProcessIn(t, ourNS, "proxy", "--kubeconfig", api.KubeconfigOf("proxy"), "--proxy-mode", mode,
		"--hostname-override", diffNode, "--cluster-cidr", cidr,
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-proxy logs:\n%s\nsvcnet proxy logs:\n%s", kp.Logs(), ours.Logs())
		}
	})

	// Settled: every cluster IP is in both tables, and neither changed in
	// the last second.
	var want, got []string
	var last string
	deadline := time.Now().Add(90 * time.Second)
	for {
		if kp.Exited() || ours.Exited() {
			t.Fatal("a proxy exited")
		}
		kpText, kpItems := dump(kpNS, mode, fam)
		ourText, ourItems := dump(ourNS, mode, fam)
		joined := strings.Join(kpItems, "\n") + "\n--\n" + strings.Join(ourItems, "\n")
		settled := joined == last
		for _, ip := range clusterIPs {
			settled = settled && strings.Contains(kpText, ip) && strings.Contains(ourText, ip)
		}
		if settled {
			want, got = kpItems, ourItems
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tables did not settle with every cluster IP %v in 90 s\nkube-proxy:\n%s\nours:\n%s", clusterIPs, kpText, ourText)
		}
		last = joined
		time.Sleep(time.Second)
	}

	joined := strings.Join(want, "\n")
	for _, m := range mustHave[mode] {
		if !strings.Contains(joined, m) {
			t.Errorf("kube-proxy wrote no %q for the fixture: the comparison does not cover it", m)
		}
	}
	onlyKP, onlyOurs := multisetDiff(want, got)
	find := func(item string) (difference, bool) {
		i := slices.IndexFunc(documented[mode], func(d difference) bool { return d.item.MatchString(item) })
		if i < 0 {
			return difference{}, false
		}
		return documented[mode][i], true
	}
	byDesign := 0
	for _, it := range want {
		if d, ok := find(it); ok && d.byDesign {
			byDesign++
		}
	}
	for where, items := range map[string][]string{"kube-proxy's table": onlyKP, "ours": onlyOurs} {
		for _, it := range items {
			if _, ok := find(it); !ok {
				t.Errorf("only in %s: %s", where, it)
			}
		}
	}
	same, counted := len(want)-len(onlyKP), len(want)-byDesign
	sameCounted := same
	for _, it := range want {
		if d, ok := find(it); ok && d.byDesign && !slices.Contains(onlyKP, it) {
			sameCounted-- // identical, but not counted
		}
	}
	t.Logf("%s %s: %d of kube-proxy's %d items identical (%.1f%%); %d of the %d outside the features svcnet leaves out by design (%.1f%%); "+
		"%d only in kube-proxy's table, %d only in ours",
		mode, fam, same, len(want), 100*float64(same)/float64(len(want)), sameCounted, counted, 100*float64(sameCounted)/float64(counted),
		len(onlyKP), len(onlyOurs))
	if float64(sameCounted) < 0.98*float64(counted) {
		t.Errorf("only %d of kube-proxy's %d items are identical in ours; want at least 98%%", sameCounted, counted)
	}
}

// createDiffFixture creates a Service of every shape, with hand-made
// EndpointSlices (no controller runs), and returns their cluster IPs.
func createDiffFixture(t *testing.T, client kubernetes.Interface, fam v1.IPFamily) []string {
	t.Helper()
	ctx := framework.Context(t, time.Minute)
	addr := func(i int) string { // a pod's address; even ones are on this node
		if fam == v1.IPv6Protocol {
			return fmt.Sprintf("fd00:10:244:%x::%x", i%2+1, 10+i)
		}
		return fmt.Sprintf("10.244.%d.%d", i%2+1, 10+i)
	}
	ext := func(i int) string { // documentation addresses
		if fam == v1.IPv6Protocol {
			return fmt.Sprintf("2001:db8::%x", i)
		}
		return fmt.Sprintf("203.0.113.%d", i)
	}
	srcRanges := []string{"198.51.100.0/24", "10.1.0.0/24"} // the second holds the node's address
	if fam == v1.IPv6Protocol {
		srcRanges = []string{"2001:db8:100::/64", "fd00:1::/64"}
	}
	type ep struct {
		i                           int
		ready, serving, terminating bool
	}
	readyEP := func(is ...int) []ep {
		var out []ep
		for _, i := range is {
			out = append(out, ep{i: i, ready: true, serving: true})
		}
		return out
	}
	tcp := []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}
	cases := []struct {
		name   string
		spec   v1.ServiceSpec
		lb     string
		eps    []ep
		noEPS  bool
		ports  []v1.ServicePort
		portIn int32
	}{
		{name: "clusterip", eps: readyEP(0, 1, 2)},
		{name: "single", eps: readyEP(3)},
		{name: "dns", eps: readyEP(0, 1), ports: []v1.ServicePort{
			{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(5353)},
			{Name: "dns-tcp", Protocol: v1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(5353)}}},
		{name: "nodeport", spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort}, eps: readyEP(0, 1)},
		{name: "nodeport-local", spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal}, eps: readyEP(0, 1, 3)},
		{name: "nodeport-local-remote", spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal}, eps: readyEP(1, 3)},
		{name: "lb", spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, LoadBalancerSourceRanges: srcRanges}, lb: ext(10), eps: readyEP(0, 1)},
		{name: "lb-open", spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}, lb: ext(11), eps: readyEP(2)},
		{name: "externalips", spec: v1.ServiceSpec{ExternalIPs: []string{ext(20), ext(21)}}, eps: readyEP(0, 1)},
		{name: "affinity", spec: v1.ServiceSpec{SessionAffinity: v1.ServiceAffinityClientIP}, eps: readyEP(0, 1, 2)},
		{name: "affinity-np", spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, SessionAffinity: v1.ServiceAffinityClientIP,
			ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal}, eps: readyEP(0, 1)},
		{name: "internal-local", spec: v1.ServiceSpec{InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyLocal)}, eps: readyEP(0, 1, 2)},
		{name: "internal-local-remote", spec: v1.ServiceSpec{InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyLocal)}, eps: readyEP(1)},
		{name: "no-endpoints", noEPS: true},
		{name: "no-endpoints-np", spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort}, noEPS: true},
		{name: "terminating", eps: []ep{{i: 0, serving: true, terminating: true}, {i: 1, serving: true, terminating: true}, {i: 2, terminating: true}}},
		{name: "unready", eps: []ep{{i: 0}, {i: 1, ready: true, serving: true}}},
		{name: "udp", eps: readyEP(0, 1), ports: []v1.ServicePort{{Name: "syslog", Protocol: v1.ProtocolUDP, Port: 514, TargetPort: intstr.FromInt32(5514)}}},
	}
	var ips []string
	for _, c := range cases {
		spec := c.spec
		spec.IPFamilies = []v1.IPFamily{fam}
		spec.Ports = c.ports
		if spec.Ports == nil {
			spec.Ports = tcp
		}
		spec.Selector = nil
		svc, err := client.CoreV1().Services("default").Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: c.name}, Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("service %s: %v", c.name, err)
		}
		ips = append(ips, svc.Spec.ClusterIP)
		if c.lb != "" {
			svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: c.lb}}
			if _, err := client.CoreV1().Services("default").UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("service %s status: %v", c.name, err)
			}
		}
		if c.noEPS {
			continue
		}
		slice := &discovery.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: c.name + "-1", Labels: map[string]string{discovery.LabelServiceName: c.name}},
		}
		slice.AddressType = discovery.AddressTypeIPv4
		if fam == v1.IPv6Protocol {
			slice.AddressType = discovery.AddressTypeIPv6
		}
		for _, p := range spec.Ports {
			slice.Ports = append(slice.Ports, discovery.EndpointPort{Name: ptr.To(p.Name), Protocol: ptr.To(p.Protocol), Port: ptr.To(p.TargetPort.IntVal)})
		}
		for _, e := range c.eps {
			n := diffNode
			if e.i%2 == 1 {
				n = "node-b"
			}
			slice.Endpoints = append(slice.Endpoints, discovery.Endpoint{Addresses: []string{addr(e.i)}, NodeName: ptr.To(n),
				Conditions: discovery.EndpointConditions{Ready: ptr.To(e.ready), Serving: ptr.To(e.serving), Terminating: ptr.To(e.terminating)}})
		}
		if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatalf("endpoint slice %s: %v", c.name, err)
		}
	}
	for i, ip := range ips { // as nft prints them
		ips[i] = netip.MustParseAddr(ip).String()
	}
	return ips
}

// nftItems splits `nft list table` output into items: each set's, map's
// and chain's declaration, each of their properties ("set X: type …"),
// each rule ("chain X: …") and each element ("map X element …").
func nftItems(text string) []string {
	var items []string
	block := ""
	var elems strings.Builder
	inElems := false
	flushElems := func() {
		for _, e := range splitTop(strings.TrimSuffix(strings.TrimSpace(elems.String()), "}")) {
			if e = strings.TrimSpace(e); e != "" {
				items = append(items, block+" element "+e)
			}
		}
		elems.Reset()
		inElems = false
	}
	for _, raw := range strings.Split(text, "\n") {
		l := strings.TrimSpace(raw)
		switch {
		case inElems:
			elems.WriteString(" " + l)
			if strings.HasSuffix(l, "}") {
				flushElems()
			}
		case l == "" || strings.HasPrefix(l, "table "):
		case strings.HasPrefix(l, "elements = {"):
			elems.WriteString(strings.TrimPrefix(l, "elements = {"))
			inElems = true
			if strings.HasSuffix(l, "}") {
				flushElems()
			}
		case strings.HasSuffix(l, " {") && (strings.HasPrefix(l, "chain ") || strings.HasPrefix(l, "set ") || strings.HasPrefix(l, "map ")):
			block = strings.TrimSuffix(l, " {")
			items = append(items, block)
		case l == "}":
			block = ""
		case block == "":
			items = append(items, "table: "+l)
		default:
			items = append(items, block+": "+l)
		}
	}
	return items
}

// saveCounters are iptables-save's packet and byte counts.
var saveCounters = regexp.MustCompile(` \[\d+:\d+\]$`)

// iptablesItems splits iptables-save output into items: each chain
// ("nat :KUBE-SERVICES") and each rule ("nat -A KUBE-SERVICES …").
func iptablesItems(text string) []string {
	var items []string
	table := ""
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case strings.HasPrefix(l, ":"):
			items = append(items, table+" "+saveCounters.ReplaceAllString(l, ""))
		case strings.HasPrefix(l, "-A "):
			items = append(items, table+" "+l)
		}
	}
	return items
}

// splitTop splits s at the commas outside quotes and braces.
func splitTop(s string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case quoted:
		case r == '{':
			depth++
		case r == '}':
			depth--
		case r == ',' && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// multisetDiff returns the items of a not in b and of b not in a,
// counting repeats.
func multisetDiff(a, b []string) (onlyA, onlyB []string) {
	count := map[string]int{}
	for _, x := range b {
		count[x]++
	}
	for _, x := range a {
		if count[x] > 0 {
			count[x]--
		} else {
			onlyA = append(onlyA, x)
		}
	}
	for _, x := range b {
		if count[x] > 0 {
			count[x]--
			onlyB = append(onlyB, x)
		}
	}
	return onlyA, onlyB
}
