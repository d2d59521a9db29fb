package proxy_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	utiliptables "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/iptables"
	"github.com/svcnet/svcnet/internal/svcstate"
	. "github.com/svcnet/svcnet/internal/svcstate/svctest"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// firstPacketConnects bounds the connections measured per table size.
const (
	firstPacketConnects = 3000
	firstPacketRounds   = 3
	firstPacketTimeout  = time.Minute
)

// BenchmarkFirstPacket measures what a Service costs the packets that
// open connections: a client namespace connects, over and over, to a
// cluster IP that a router namespace (the node) DNATs to a server
// namespace, while the node holds the rules of N services. Each TCP
// connect is timed (one round trip through the rules: the SYN is
// DNATed, the SYN-ACK follows conntrack). The measured service sorts
// last, so the iptables mode walks all of KUBE-SERVICES before finding
// it; the nftables mode finds it in one map lookup. Services have one
// endpoint each (the dispatch, not the endpoint count, is what grows).
//
//	go test ./test/e2e/proxy -run '^$' -bench FirstPacket -benchtime 1x -timeout 60m
//
// With SVCNET_PLOT=file.svg it draws p50 against the number of services;
// SVCNET_FP_SIZES (e.g. 10,30000) and SVCNET_FP_MODES (e.g. nftables)
// choose a part of the rows.
func BenchmarkFirstPacket(b *testing.B) {
	framework.RequireRoot(b)
	sizes := []int{10, 1000, 10000, 30000}
	if env := os.Getenv("SVCNET_FP_SIZES"); env != "" { // a quicker run
		sizes = nil
		for _, f := range strings.Split(env, ",") {
			var n int
			if _, err := fmt.Sscan(f, &n); err != nil || n < 1 {
				b.Fatalf("SVCNET_FP_SIZES %q: %v", env, err)
			}
			sizes = append(sizes, n)
		}
	}
	modes := []string{"iptables", "nftables"}
	if env := os.Getenv("SVCNET_FP_MODES"); env != "" { // one mode's rows
		modes = strings.Split(env, ",")
	}
	// Rounds interleave modes and sizes, so that a noisy minute of the
	// machine does not land on one of them only; each figure is the
	// median over the rounds.
	p50s, p99s := map[string][][]time.Duration{}, map[string][][]time.Duration{}
	for _, m := range modes {
		p50s[m], p99s[m] = make([][]time.Duration, len(sizes)), make([][]time.Duration, len(sizes))
	}
	for round := range firstPacketRounds {
		for i, n := range sizes {
			for _, mode := range modes {
				b.Run(fmt.Sprintf("round=%d/services=%d/mode=%s", round, n, mode), func(b *testing.B) {
					var lat []time.Duration
					for range b.N {
						lat = firstPacket(b, mode, n)
					}
					p50s[mode][i] = append(p50s[mode][i], framework.Percentile(lat, 50))
					p99s[mode][i] = append(p99s[mode][i], framework.Percentile(lat, 99))
					b.ReportMetric(float64(framework.Percentile(lat, 50).Microseconds()), "connect-p50-µs")
					b.ReportMetric(float64(framework.Percentile(lat, 99).Microseconds()), "connect-p99-µs")
					b.ReportMetric(0, "ns/op")
				})
			}
		}
	}
	results := map[string][]time.Duration{}
	for _, mode := range modes {
		for i, n := range sizes {
			if len(p50s[mode][i]) == 0 {
				b.Logf("no figures for %s mode at %d services (filtered out or failed)", mode, n)
				return
			}
			p50, p99 := framework.Percentile(p50s[mode][i], 50), framework.Percentile(p99s[mode][i], 50)
			results[mode] = append(results[mode], p50)
			// Printed, not logged: a parent benchmark's log is not shown.
			fmt.Printf("first packet: %s mode, %d services: connect p50 %s p99 %s (medians of %d rounds of %d connects)\n",
				mode, n, p50, p99, len(p50s[mode][i]), firstPacketConnects)
		}
	}
	if path := os.Getenv("SVCNET_PLOT"); path != "" {
		if err := os.WriteFile(path, []byte(plotFirstPacket(sizes, results)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// firstPacket sets up client, node and server namespaces, programs n
// services into the node in mode, and times connects.
func firstPacket(b *testing.B, mode string, n int) []time.Duration {
	b.StopTimer()
	client, node, server := routedNamespaces(b, "fp", "192.168.90")
	l := server.Listen("tcp", ":8080")
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	b.Cleanup(func() { l.Close() })

	tracker, target := oneEndpointServices(n)
	t0 := time.Now()
	cfg := proxy.Node{Name: "node-a"}
	switch mode {
	case "iptables":
		ex := &utiliptables.Exec{Netns: node.Name, Binary: "iptables"}
		p, err := iptables.NewProxier(iptables.ProxierConfig{
			Sync:                proxy.SyncerConfig{Tracker: tracker, Logger: quiet},
			Rules:               iptables.Config{NodeConfig: proxy.NodeConfig{Node: cfg}},
			Executor:            ex,
			EditTopLevelChains:  true,
			MaxChainsPerRestore: 1000,
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
	case "nftables":
		if err := node.Do(func() error {
			return syncNFTablesOnce(v1.IPv4Protocol, tracker, proxy.NodeConfig{Node: cfg})
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%s mode: %d services programmed in %s", mode, n, time.Since(t0).Round(time.Millisecond))
	// Let the namespaces of the last run finish going away: the kernel
	// frees their tables in the background, on these same two cores.
	time.Sleep(3 * time.Second)

	var lat []time.Duration
	b.StartTimer()
	err := client.Do(func() error {
		d := net.Dialer{Timeout: 2 * time.Second}
		deadline := time.Now().Add(firstPacketTimeout)
		// A few connects first: ARP and route caches warm.
		for i := 0; i < firstPacketConnects+20 && time.Now().Before(deadline); i++ {
			start := time.Now()
			c, err := d.Dial("tcp", target)
			took := time.Since(start)
			if err != nil {
				return fmt.Errorf("connect %d to %s: %w", i, target, err)
			}
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // no TIME_WAIT: thousands of connects
			}
			c.Close()
			if i >= 20 {
				lat = append(lat, took)
			}
		}
		return nil
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	return lat
}

// routedNamespaces makes a client namespace (prefix.2/24) routed through
// a node namespace to a server namespace (10.244.1.2/24), the node
// forwarding between them.
func routedNamespaces(b *testing.B, what, prefix string) (client, node, server *framework.Netns) {
	node = framework.NewNetns(b, what+"-node")
	client = framework.NewNetns(b, what+"-client")
	server = framework.NewNetns(b, what+"-server")
	framework.Veth(client, "eth0", prefix+".2/24", node, "eth1", prefix+".1/24")
	framework.Veth(server, "eth0", "10.244.1.2/24", node, "eth2", "10.244.1.1/24")
	client.IP("route", "add", "default", "via", prefix+".1")
	server.IP("route", "add", "default", "via", "10.244.1.1")
	node.Sysctl("net.ipv4.ip_forward", "1")
	return client, node, server
}

// oneEndpointServices is a tracker of n ClusterIP Services with one
// endpoint each, on another node, and the address of the one that sorts
// last, whose endpoint is 10.244.1.2:8080.
func oneEndpointServices(n int) (*svcstate.Tracker, string) {
	tracker := svcstate.NewTracker(svcstate.Config{NodeName: "node-a", Logger: quiet})
	for i := range n {
		name := fmt.Sprintf("svc-%05d", i)
		ep := fmt.Sprintf("10.200.%d.%d", i/250, i%250+1)
		if i == n-1 {
			name, ep = "zz-target", "10.244.1.2"
		}
		tracker.OnServiceAdd(Service("default", name, fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), Port("http", v1.ProtocolTCP, 80, 0)))
		tracker.OnEndpointSliceAdd(Slice("default", name, name+"-1", SlicePort("http", v1.ProtocolTCP, 8080), Endpoint(ep, "node-b")))
	}
	return tracker, fmt.Sprintf("10.96.%d.%d:80", (n-1)/250, (n-1)%250+1)
}

// plotFirstPacket draws p50 connect time against the number of services
// (log scale), one line per mode, as SVG.
func plotFirstPacket(sizes []int, results map[string][]time.Duration) string {
	const w, h, left, bottom, top, right = 640, 360, 70, 50, 30, 150
	maxY := time.Duration(0)
	for _, r := range results {
		maxY = max(maxY, slices.Max(r))
	}
	maxY = maxY * 11 / 10
	x := func(i int) float64 { return left + float64(i)*float64(w-left-right)/float64(max(len(sizes)-1, 1)) }
	y := func(d time.Duration) float64 {
		return float64(h-bottom) - float64(d)/float64(maxY)*float64(h-bottom-top)
	}
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&s, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&s, `<text x="%d" y="18" font-size="14">First-packet latency through a cluster IP (TCP connect, median)</text>`+"\n", left)
	fmt.Fprintf(&s, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&s, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, h-bottom)
	for i, n := range sizes {
		fmt.Fprintf(&s, `<text x="%.0f" y="%d" text-anchor="middle">%d</text>`+"\n", x(i), h-bottom+18, n)
	}
	fmt.Fprintf(&s, `<text x="%d" y="%d" text-anchor="middle">services on the node</text>`+"\n", (left+w-right)/2, h-12)
	for k := 0; k <= 4; k++ {
		d := maxY * time.Duration(k) / 4
		fmt.Fprintf(&s, `<text x="%d" y="%.0f" text-anchor="end">%d µs</text>`+"\n", left-6, y(d)+4, d.Microseconds())
		fmt.Fprintf(&s, `<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="#ddd"/>`+"\n", left, y(d), w-right, y(d))
	}
	colors := map[string]string{"iptables": "#d62728", "nftables": "#1f77b4"}
	row := 0
	for _, mode := range []string{"iptables", "nftables"} {
		var pts []string
		for i, d := range results[mode] {
			pts = append(pts, fmt.Sprintf("%.0f,%.0f", x(i), y(d)))
			fmt.Fprintf(&s, `<circle cx="%.0f" cy="%.0f" r="3" fill="%s"/>`+"\n", x(i), y(d), colors[mode])
		}
		fmt.Fprintf(&s, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), colors[mode])
		fmt.Fprintf(&s, `<text x="%d" y="%d" fill="%s">%s mode</text>`+"\n", w-right+10, top+20+20*row, colors[mode], mode)
		row++
	}
	s.WriteString("</svg>\n")
	return s.String()
}
