package userspace_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/freeport"
	"github.com/svcnet/svcnet/internal/iptables/iptablestest"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/trace"
	"github.com/svcnet/svcnet/internal/proxy/userspace"
	"github.com/svcnet/svcnet/internal/svcstate"
	. "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

var (
	tcp   = v1.ProtocolTCP
	udp   = v1.ProtocolUDP
	quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
)

// loopbackSockets puts proxy sockets on 127.0.0.1 and dials endpoints
// (pod addresses in the API objects) at the loopback servers that stand
// in for them; an endpoint without a server is unreachable.
type loopbackSockets struct {
	mu      sync.Mutex
	servers map[string]string // endpoint "ip:port" -> loopback address
}

func (s *loopbackSockets) ListenTCP(int) (net.Listener, error) {
	return net.Listen("tcp", "127.0.0.1:0")
}
func (s *loopbackSockets) ListenUDP(int) (net.PacketConn, error) {
	return net.ListenPacket("udp", "127.0.0.1:0")
}

func (s *loopbackSockets) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	s.mu.Lock()
	real, ok := s.servers[network+"/"+addr]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("dial %s %s: connection refused", network, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, real)
}

// serveTCP starts a server for endpoint ep that answers each connection
// with its name.
func (s *loopbackSockets) serveTCP(t *testing.T, ep, name string) {
	addr := freeport.Serve(t, func(c net.Conn) { _, _ = io.WriteString(c, name+"\n") })
	s.mu.Lock()
	s.servers["tcp/"+ep] = addr
	s.mu.Unlock()
}

// serveUDP starts an endpoint that answers each datagram with its name.
func (s *loopbackSockets) serveUDP(t *testing.T, ep, name string) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(name+":"+string(buf[:n])), from)
		}
	}()
	s.mu.Lock()
	s.servers["udp/"+ep] = pc.LocalAddr().String()
	s.mu.Unlock()
}

type world struct {
	t       *testing.T
	tracker *svcstate.Tracker
	fake    *iptablestest.Fake
	socks   *loopbackSockets
	proxier *userspace.Proxier
	metrics *proxy.Metrics
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, fake: iptablestest.NewFake(), socks: &loopbackSockets{servers: map[string]string{}}, metrics: proxy.NewMetrics(nil)}
	w.tracker = svcstate.NewTracker(svcstate.Config{NodeName: "node-a", Logger: quiet})
	p, err := userspace.NewProxier(userspace.Config{
		Rules:          proxy.NodeConfig{Node: proxy.Node{Name: "node-a"}},
		Sync:           proxy.SyncerConfig{Tracker: w.tracker, Metrics: w.metrics, Logger: quiet},
		Executor:       w.fake,
		Sockets:        w.socks,
		UDPIdleTimeout: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	w.proxier = p
	return w
}

func (w *world) sync() {
	w.t.Helper()
	if err := w.proxier.Sync(context.Background()); err != nil {
		w.t.Fatal(err)
	}
}

// proxyPort finds, with the tracer, where the rules send pkt.
func (w *world) proxyPort(pkt trace.Packet) int {
	w.t.Helper()
	var all []byte
	for _, table := range []string{"filter", "nat"} {
		b, err := w.fake.Save(context.Background(), table)
		if err != nil {
			w.t.Fatal(err)
		}
		all = append(all, b...)
	}
	rs, err := trace.Parse(all)
	if err != nil {
		w.t.Fatal(err)
	}
	out := trace.Trace(rs, pkt, trace.Env{LocalAddrs: []netip.Addr{netip.MustParseAddr("192.168.0.10")}}).Outcomes()
	if len(out) != 1 || !out[0].DNAT {
		w.t.Fatalf("%v is not redirected: %+v", pkt, out)
	}
	return int(out[0].Dst.Port())
}

func ask(t *testing.T, port int) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

func counter(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	m := &dto.Metric{}
	if err := c.Write(m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

var toCluster = trace.Packet{Src: netip.MustParseAddr("10.244.1.5"), SrcPort: 40000,
	Dst: netip.MustParseAddrPort("10.96.0.10:80"), Proto: "tcp"}

func TestTCPRoundRobinRetryAndAffinity(t *testing.T) {
	w := newWorld(t)
	w.tracker.OnServiceAdd(Service("default", "web", "10.96.0.10", Port("http", tcp, 80, 30080), Type(v1.ServiceTypeNodePort)))
	w.tracker.OnEndpointSliceAdd(Slice("default", "web", "web-1", SlicePort("http", tcp, 8080),
		Endpoint("10.244.1.2", "node-a"), Endpoint("10.244.2.2", "node-b"), Endpoint("10.244.3.2", "node-c")))
	for i, ep := range []string{"10.244.1.2:8080", "10.244.2.2:8080", "10.244.3.2:8080"} {
		w.socks.serveTCP(t, ep, fmt.Sprintf("pod-%d", i))
	}
	w.sync()
	port := w.proxyPort(toCluster)
	// The node port goes to the same socket: both policies are Cluster.
	np := toCluster
	np.Dst = netip.MustParseAddrPort("192.168.0.10:30080")
	if got := w.proxyPort(np); got != port {
		t.Errorf("node port redirected to %d, cluster IP to %d", got, port)
	}

	counts := map[string]int{}
	for range 30 {
		name, err := ask(t, port)
		if err != nil {
			t.Fatal(err)
		}
		counts[name]++
	}
	if counts["pod-0"] != 10 || counts["pod-1"] != 10 || counts["pod-2"] != 10 {
		t.Errorf("round robin is not even: %v", counts)
	}

	// An endpoint dies without the API knowing: every connection still
	// succeeds, on the others.
	w.socks.mu.Lock()
	delete(w.socks.servers, "tcp/10.244.2.2:8080")
	w.socks.mu.Unlock()
	clear(counts)
	for range 30 {
		name, err := ask(t, port)
		if err != nil {
			t.Fatalf("connection failed although two endpoints live: %v", err)
		}
		counts[name]++
	}
	if counts["pod-1"] != 0 || counts["pod-0"] != 15 || counts["pod-2"] != 15 {
		t.Errorf("after pod-1 died: %v", counts)
	}
	if counter(t, w.metrics.EndpointDialFailures) == 0 {
		t.Error("dial failures not counted")
	}

	// Affinity: one client, one endpoint.
	w.tracker.OnServiceUpdate(nil, Service("default", "web", "10.96.0.10", Port("http", tcp, 80, 30080), Type(v1.ServiceTypeNodePort),
		Affinity(60), ResourceVersion("2")))
	w.sync()
	if got := w.proxyPort(toCluster); got != port {
		t.Errorf("an affinity change moved the socket from %d to %d", port, got)
	}
	clear(counts)
	for range 10 {
		name, _ := ask(t, port)
		counts[name]++
	}
	if len(counts) != 1 {
		t.Errorf("affinity ignored: %v", counts)
	}
}

func TestNoEndpointsResets(t *testing.T) {
	w := newWorld(t)
	w.tracker.OnServiceAdd(Service("default", "web", "10.96.0.10", Port("http", tcp, 80, 0)))
	w.sync()
	port := w.proxyPort(toCluster)
	if _, err := ask(t, port); err == nil || !(errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset")) {
		t.Errorf("connection to a service without endpoints: %v", err)
	}
	// The service goes: socket and rules with it.
	w.tracker.OnServiceDelete(Service("default", "web", "10.96.0.10"))
	w.sync()
	if len(w.proxier.ProxyPorts()) != 0 {
		t.Errorf("sockets left: %v", w.proxier.ProxyPorts())
	}
	if data, _ := w.fake.Save(context.Background(), "nat"); strings.Contains(string(data), "REDIRECT") {
		t.Errorf("rules left:\n%s", data)
	}
}

func TestExternalLocalGetsItsOwnSocket(t *testing.T) {
	w := newWorld(t)
	w.tracker.OnServiceAdd(Service("default", "web", "10.96.0.10", Port("http", tcp, 80, 30080), Type(v1.ServiceTypeNodePort), ExternalLocal(0)))
	w.tracker.OnEndpointSliceAdd(Slice("default", "web", "web-1", SlicePort("http", tcp, 8080),
		Endpoint("10.244.1.2", "node-a"), Endpoint("10.244.2.2", "node-b")))
	w.socks.serveTCP(t, "10.244.1.2:8080", "local")
	w.socks.serveTCP(t, "10.244.2.2:8080", "remote")
	w.sync()
	np := toCluster
	np.Dst = netip.MustParseAddrPort("192.168.0.10:30080")
	internal, external := w.proxyPort(toCluster), w.proxyPort(np)
	if internal == external {
		t.Fatal("one socket for both policies")
	}
	for range 6 {
		if name, _ := ask(t, external); name != "local" {
			t.Fatalf("external traffic reached %q", name)
		}
	}
	seen := map[string]bool{}
	for range 6 {
		name, _ := ask(t, internal)
		seen[name] = true
	}
	if !seen["local"] || !seen["remote"] {
		t.Errorf("cluster IP traffic reached only %v", seen)
	}
}

func TestUDPSessions(t *testing.T) {
	w := newWorld(t)
	w.tracker.OnServiceAdd(Service("kube-system", "dns", "10.96.0.53", Port("dns", udp, 53, 0)))
	w.tracker.OnEndpointSliceAdd(Slice("kube-system", "dns", "dns-1", SlicePort("dns", udp, 5353),
		Endpoint("10.244.1.53", "node-a"), Endpoint("10.244.2.53", "node-b")))
	w.socks.serveUDP(t, "10.244.1.53:5353", "dns-a")
	w.socks.serveUDP(t, "10.244.2.53:5353", "dns-b")
	w.sync()
	pkt := toCluster
	pkt.Dst, pkt.Proto = netip.MustParseAddrPort("10.96.0.53:53"), "udp"
	port := w.proxyPort(pkt)

	exchange := func(c net.PacketConn, msg string) string {
		t.Helper()
		if _, err := c.WriteTo([]byte(msg), &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 1500)
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			t.Fatal(err)
		}
		if from.(*net.UDPAddr).Port != port {
			t.Errorf("reply from %v, not from the proxy socket", from)
		}
		return string(buf[:n])
	}
	client := func() net.PacketConn {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// One client keeps its endpoint while it talks: a session.
	c1 := client()
	first := exchange(c1, "q1")
	if second := exchange(c1, "q2"); strings.Split(second, ":")[0] != strings.Split(first, ":")[0] || !strings.HasSuffix(second, ":q2") {
		t.Errorf("session broken: %q then %q", first, second)
	}
	// Another client is balanced to the other endpoint.
	if other := exchange(client(), "q"); strings.Split(other, ":")[0] == strings.Split(first, ":")[0] {
		t.Errorf("second client went to the same endpoint %q", other)
	}
	// After the idle timeout the session is gone and the next datagram
	// starts a new one, balanced afresh.
	time.Sleep(600 * time.Millisecond)
	if again := exchange(c1, "q3"); !strings.HasSuffix(again, ":q3") {
		t.Errorf("after idle: %q", again)
	}
}
