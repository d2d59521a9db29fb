package proxy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

// The IPv6 side of the test network (unique local addresses, inside the
// test's namespaces only).
const (
	nodeIP6    = "fd00:77::1"
	clientIP6  = "fd00:77::100"
	bridgeIP6  = "fd00:10:244:1::1"
	podPrefix6 = "fd00:10:244:1::"
	serviceNet = "fd00:96::/108"
)

// TestIPv6Services: the iptables and nftables modes proxy IPv6 Services
// (their second, IPv6 proxier; an API server whose service range is IPv6
// gives the Services IPv6 cluster IPs): a ClusterIP from a pod and a
// NodePort from outside the node reach both pods by their IPv6
// addresses, in ip6tables or the ip6 kube-proxy table.
func TestIPv6Services(t *testing.T) {
	for _, mode := range []string{"iptables", "nftables"} {
		t.Run(mode, func(t *testing.T) { testIPv6(t, mode) })
	}
}

func testIPv6(t *testing.T, mode string) {
	framework.RequireRoot(t)
	api := framework.StartAPIServer(t, "--service-cluster-ip-range", serviceNet)
	client := api.Client()
	ctx := framework.Context(t, time.Minute)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: nodeIP}, {Type: v1.NodeInternalIP, Address: nodeIP6}}}}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	nodeNS := framework.NewNetns(t, "node6")
	nodeNS.Bridge("cbr0", bridgeIP+"/24")
	nodeNS.IP("-6", "addr", "add", bridgeIP6+"/64", "dev", "cbr0", "nodad")
	nodeNS.Sysctl("net.ipv6.conf.all.forwarding", "1")
	nodeNS.Sysctl("net.bridge.bridge-nf-call-ip6tables", "1")
	out := framework.NewNetns(t, "client6")
	framework.Veth(nodeNS, "eth1", nodeIP+"/24", out, "eth0", clientIP+"/24")
	nodeNS.IP("-6", "addr", "add", nodeIP6+"/64", "dev", "eth1", "nodad")
	out.IP("-6", "addr", "add", clientIP6+"/64", "dev", "eth0", "nodad")
	var pods []*pod
	for i := range 2 {
		p := &pod{name: fmt.Sprintf("pod-%d", i), ip: fmt.Sprintf("%s%x", podPrefix6, 0x10+i)}
		p.ns = framework.NewNetns(t, fmt.Sprintf("pod6-%d", i))
		veth := fmt.Sprintf("veth%d", i)
		framework.Veth(nodeNS, veth, "", p.ns, "eth0", "")
		p.ns.IP("-6", "addr", "add", p.ip+"/64", "dev", "eth0", "nodad")
		nodeNS.Attach(veth, "cbr0")
		nodeNS.IP("link", "set", veth, "type", "bridge_slave", "hairpin", "on")
		p.ns.IP("-6", "route", "add", "default", "via", bridgeIP6)
		p.serveHTTP(t, httpPort)
		pods = append(pods, p)
	}
	nodeNS.ForwardAPIServer(api)

	svc, err := client.CoreV1().Services("default").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web6"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, Ports: []v1.ServicePort{
			{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(httpPort)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(svc.Spec.ClusterIP, ":") {
		t.Fatalf("cluster IP %q, want one from %s", svc.Spec.ClusterIP, serviceNet)
	}
	slice := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web6-1", Labels: map[string]string{discovery.LabelServiceName: "web6"}},
		AddressType: discovery.AddressTypeIPv6,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](httpPort)}},
	}
	for _, p := range pods {
		slice.Endpoints = append(slice.Endpoints, discovery.Endpoint{Addresses: []string{p.ip}, NodeName: ptr.To(nodeName),
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true)}})
	}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	proxy := framework.StartProcessIn(t, nodeNS, "proxy", "--kubeconfig", api.KubeconfigOf("proxy"), "--proxy-mode", mode,
		"--hostname-override", nodeName, "--cluster-cidr", clusterNet+",fd00:10:244::/56",
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "0.0.0.0:10256")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("svcnet proxy (%s) logs:\n%s", mode, proxy.Logs())
		}
	})

	c := &cluster{t: t, mode: mode}
	for _, u := range []struct {
		what string
		from *framework.Netns
		url  string
	}{
		{"ClusterIP from pod-1", pods[1].ns, fmt.Sprintf("http://[%s]:80/", svc.Spec.ClusterIP)},
		{"NodePort from outside the node", out, fmt.Sprintf("http://[%s]:%d/", nodeIP6, svc.Spec.Ports[0].NodePort)},
	} {
		var h hits
		c.until(u.what+" to answer from both pods", 30*time.Second, func() error {
			if proxy.Exited() {
				t.Fatalf("svcnet proxy exited:\n%s", proxy.Logs())
			}
			h = c.hit(u.from, u.url, 20)
			if h.failed > 0 || h.byPod["pod-0"] == 0 || h.byPod["pod-1"] == 0 {
				return fmt.Errorf("%v, %d failed (%v)", h.byPod, h.failed, h.lastErr)
			}
			return nil
		})
		if u.from == out {
			// Masqueraded to the node, as an IPv4 NodePort with policy
			// Cluster is.
			for pod, clients := range h.clients {
				if clients[clientIP6] {
					t.Errorf("%s saw the client's own address %s: not masqueraded", pod, clientIP6)
				}
			}
		}
	}
	var rules string
	if mode == "iptables" {
		rules = nodeNS.Run("ip6tables-save", "-t", "nat")
	} else {
		rules = nodeNS.Run("nft", "list", "table", "ip6", "kube-proxy")
	}
	if !strings.Contains(rules, svc.Spec.ClusterIP) {
		t.Errorf("the %s rules do not name %s:\n%s", mode, svc.Spec.ClusterIP, rules)
	}
}
