package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/ipset"
	utiliptables "github.com/svcnet/svcnet/internal/iptables"
	kipvs "github.com/svcnet/svcnet/internal/ipvs"
	"github.com/svcnet/svcnet/internal/netns"
	nft "github.com/svcnet/svcnet/internal/nftables"
	ipvsproxy "github.com/svcnet/svcnet/internal/proxy/ipvs"
	"github.com/svcnet/svcnet/internal/proxy/nftables"
	"github.com/svcnet/svcnet/internal/proxy/trace"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// The addresses of the test network: private ranges, inside namespaces
// only. The client reaches the node over a link of its own; nothing has
// a default route out of the test's namespaces.
const (
	nodeName   = "node-1"
	nodeIP     = "192.168.77.1"
	clientIP   = "192.168.77.100"
	bridgeIP   = "10.244.1.1"
	podCIDR    = "10.244.1.0/24"
	clusterNet = "10.244.0.0/16"
	httpPort   = 9376 // every pod answers HTTP here: "<pod> <client ip:port>"
	udpPort    = 9377 // and UDP here, the same way
)

// pod is a network namespace on the node's bridge with an HTTP and a UDP
// server of the test process inside it.
type pod struct {
	name string
	ns   *framework.Netns
	ip   string
}

// cluster is one node, its pods, a client outside the node, an API
// server, and `svcnet proxy` running in the node.
type cluster struct {
	t      *testing.T
	mode   string
	api    *framework.APIServer
	client kubernetes.Interface
	node   *framework.Netns
	out    *framework.Netns // the client outside the cluster
	pods   []*pod
	proxy  *framework.Process
}

func newCluster(t *testing.T, mode string, pods int, proxyArgs ...string) *cluster {
	t.Helper()
	framework.RequireRoot(t)
	c := &cluster{t: t, mode: mode}
	c.api = framework.StartAPIServer(t)
	c.client = c.api.Client()
	ctx := framework.Context(t, time.Minute)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: nodeIP}}}}
	if _, err := c.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	c.node = framework.NewNetns(t, "node")
	c.node.Bridge("cbr0", bridgeIP+"/24")
	// Inside the node only: route between pods and the client, and let
	// bridged pod-to-pod traffic see the service rules, as a CNI would.
	c.node.Sysctl("net.ipv4.ip_forward", "1")
	c.node.Sysctl("net.bridge.bridge-nf-call-iptables", "1")
	c.out = framework.NewNetns(t, "client")
	framework.Veth(c.node, "eth1", nodeIP+"/24", c.out, "eth0", clientIP+"/24")
	for i := range pods {
		c.addPod(i)
	}
	c.node.ForwardAPIServer(c.api)

	c.startProxy(mode, proxyArgs...)
	return c
}

// startProxy starts `svcnet proxy` in mode on the node and waits until
// it reports healthy.
func (c *cluster) startProxy(mode string, proxyArgs ...string) {
	t := c.t
	t.Helper()
	c.mode = mode
	args := []string{"proxy", "--kubeconfig", c.api.KubeconfigOf("proxy"), "--proxy-mode", mode,
		"--hostname-override", nodeName, "--cluster-cidr", clusterNet,
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "0.0.0.0:10256"}
	args = append(args, proxyArgs...)
	proxy := framework.StartProcessIn(t, c.node, args...)
	c.proxy = proxy
	c.until("the proxy to report healthy", 60*time.Second, func() error {
		if proxy.Exited() {
			t.Fatalf("svcnet proxy exited:\n%s", proxy.Logs())
		}
		code, _, err := c.get(c.node, "http://127.0.0.1:10256/healthz")
		if err == nil && code != 200 {
			err = fmt.Errorf("/healthz %d", code)
		}
		return err
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("svcnet proxy (%s) logs:\n%s", mode, proxy.Logs())
		}
	})
}

func (c *cluster) addPod(i int) *pod {
	p := &pod{name: fmt.Sprintf("pod-%d", i), ip: fmt.Sprintf("10.244.1.%d", 10+i)}
	p.ns = framework.NewNetns(c.t, fmt.Sprintf("pod%d", i))
	framework.Veth(c.node, fmt.Sprintf("veth%d", i), "", p.ns, "eth0", p.ip+"/24")
	c.node.Attach(fmt.Sprintf("veth%d", i), "cbr0")
	// What the CNI bridge plugin's hairpinMode does: with bridged
	// traffic going through the service rules, a pod's packet DNATed back
	// to itself leaves through the port it came in on.
	c.node.IP("link", "set", fmt.Sprintf("veth%d", i), "type", "bridge_slave", "hairpin", "on")
	p.ns.IP("route", "add", "default", "via", bridgeIP)
	p.serveHTTP(c.t, httpPort)
	p.serveUDP(c.t, udpPort)
	c.pods = append(c.pods, p)
	return p
}

// serveHTTP answers every request with the pod's name and the address
// the request came from, as the pod sees it.
func (p *pod) serveHTTP(t *testing.T, port int) net.Listener {
	l := p.ns.Listen("tcp", fmt.Sprintf(":%d", port))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", p.name, r.RemoteAddr)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l
}

func (p *pod) serveUDP(t *testing.T, port int) {
	pc := p.ns.ListenPacket("udp", fmt.Sprintf(":%d", port))
	go func() {
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(p.name+" "+from.String()), from)
		}
	}()
}

// get fetches url over a new connection made inside ns.
func (c *cluster) get(ns *framework.Netns, url string) (int, string, error) {
	resp, err := ns.HTTPClient(3 * time.Second).Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// hits makes n requests, each on a new connection, and counts the
// answering pods; answers maps pod to the client addresses it saw.
type hits struct {
	byPod   map[string]int
	clients map[string]map[string]bool // pod -> client IPs it saw
	failed  int
	lastErr error
}

func (c *cluster) hit(ns *framework.Netns, url string, n int) hits {
	h := hits{byPod: map[string]int{}, clients: map[string]map[string]bool{}}
	for range n {
		_, body, err := c.get(ns, url)
		if err != nil {
			h.failed++
			h.lastErr = err
			continue
		}
		podName, client, _ := strings.Cut(body, " ")
		h.byPod[podName]++
		host, _, _ := net.SplitHostPort(client)
		if h.clients[podName] == nil {
			h.clients[podName] = map[string]bool{}
		}
		h.clients[podName][host] = true
	}
	return h
}

func (c *cluster) until(what string, timeout time.Duration, cond func() error) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ep is an endpoint of a hand-written EndpointSlice.
type ep struct {
	pod   *pod
	ip    string // when not a pod of the test
	node  string
	ready bool
}

func ready(p *pod) ep { return ep{pod: p, node: nodeName, ready: true} }

// service creates a selector-less Service (the API server allocates its
// cluster IP and node ports) and removes it when the test ends.
func (c *cluster) service(name string, mutate func(*v1.Service)) *v1.Service {
	c.t.Helper()
	ctx := framework.Context(c.t, time.Minute)
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(httpPort)}}}}
	if mutate != nil {
		mutate(svc)
	}
	svc, err := c.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		ctx := framework.Context(c.t, time.Minute)
		_ = c.client.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{})
		_ = c.client.DiscoveryV1().EndpointSlices("default").Delete(ctx, name+"-1", metav1.DeleteOptions{})
	})
	return svc
}

// slice writes the one EndpointSlice of service svc, with its ports named
// and numbered like the service's unless ports are given.
func (c *cluster) slice(svc *v1.Service, port int32, proto v1.Protocol, eps ...ep) {
	c.t.Helper()
	ctx := framework.Context(c.t, time.Minute)
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: svc.Name + "-1", Namespace: "default", Labels: map[string]string{
			discovery.LabelServiceName: svc.Name, discovery.LabelManagedBy: "svcnet-e2e"},
			Annotations: map[string]string{v1.EndpointsLastChangeTriggerTime: time.Now().Format(time.RFC3339Nano)}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To(svc.Spec.Ports[0].Name), Port: ptr.To(port), Protocol: ptr.To(proto)}},
	}
	for _, e := range eps {
		ip := e.ip
		if e.pod != nil {
			ip = e.pod.ip
		}
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(e.node),
			Conditions: discovery.EndpointConditions{Ready: ptr.To(e.ready), Serving: ptr.To(e.ready), Terminating: ptr.To(false)}})
	}
	old, err := c.client.DiscoveryV1().EndpointSlices("default").Get(ctx, s.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = c.client.DiscoveryV1().EndpointSlices("default").Create(ctx, s, metav1.CreateOptions{})
	case err == nil:
		s.ResourceVersion = old.ResourceVersion
		_, err = c.client.DiscoveryV1().EndpointSlices("default").Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		c.t.Fatal(err)
	}
}

// metric reads a counter or gauge of the proxy's /metrics, summed over
// its series.
func (c *cluster) metric(name string) (float64, error) {
	_, body, err := c.get(c.node, "http://127.0.0.1:10249/metrics")
	if err != nil {
		return 0, err
	}
	m, err := framework.ParseMetrics(body)
	if err != nil {
		return 0, err
	}
	// The sum over its series: each IP family's proxier has its own
	// (label ip_family).
	v, ok := m.Value(name)
	if !ok {
		return 0, fmt.Errorf("no metric %s", name)
	}
	return v, nil
}

// waitEndpoints waits until the proxy programs n endpoints in total: the
// point at which a change to the test's services is in effect.
func (c *cluster) waitEndpoints(n int) {
	c.t.Helper()
	c.until(fmt.Sprintf("%d endpoints programmed", n), 30*time.Second, func() error {
		v, err := c.metric("svcnet_proxy_endpoints")
		if err == nil && int(v) != n {
			err = fmt.Errorf("%v endpoints programmed", v)
		}
		return err
	})
}

// save returns the node's iptables-save output, parsed by the tracer.
func (c *cluster) rules() *trace.Ruleset {
	c.t.Helper()
	var all []byte
	for _, table := range []string{"filter", "nat"} {
		all = append(all, c.node.Run("iptables-save", "-t", table)...)
	}
	rs, err := trace.Parse(all)
	if err != nil {
		c.t.Fatalf("parse the node's rules: %v", err)
	}
	return rs
}

// traceFrom traces a new connection from src to dst through the node's
// real rules.
func (c *cluster) traceFrom(src, dst, proto string) *trace.Result {
	c.t.Helper()
	pkt := trace.Packet{Src: netip.MustParseAddr(src), SrcPort: 40000, Dst: netip.MustParseAddrPort(dst), Proto: proto}
	env := trace.Env{LocalAddrs: []netip.Addr{netip.MustParseAddr(nodeIP), netip.MustParseAddr(bridgeIP)}}
	var res *trace.Result
	if c.mode == "ipvs" {
		if err := netns.Do(c.node.Name, func() error {
			h, err := kipvs.Open("")
			if err != nil {
				return err
			}
			defer h.Close()
			src, err := ipvsproxy.LiveSource(context.Background(), h, &ipset.Runner{}, &utiliptables.Exec{Binary: "iptables"}, ipvsproxy.Netlink{}, v1.IPv4Protocol)
			res = ipvsproxy.Trace(src, pkt)
			return err
		}); err != nil {
			c.t.Fatalf("read the node's IPVS state: %v", err)
		}
		return res
	}
	if c.mode != "nftables" {
		return trace.Trace(c.rules(), pkt, env)
	}
	if err := netns.Do(c.node.Name, func() error {
		k, err := nftables.OpenKernel(v1.IPv4Protocol)
		if err != nil {
			return err
		}
		defer k.Close()
		res = nftables.Trace(nftables.LiveSource(k.Reader, nft.IPv4), pkt, env)
		return nil
	}); err != nil {
		c.t.Fatalf("read the node's nftables table: %v", err)
	}
	return res
}

// udpExchange sends one datagram from conn to dst and returns the answer.
func udpExchange(conn net.PacketConn, dst string) (string, error) {
	addr, err := net.ResolveUDPAddr("udp", dst)
	if err != nil {
		return "", err
	}
	if _, err := conn.WriteTo([]byte("ping"), addr); err != nil {
		return "", err
	}
	_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 1500)
	n, _, err := conn.ReadFrom(buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
