package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	kipvs "github.com/svcnet/svcnet/internal/ipvs"
	"github.com/svcnet/svcnet/internal/netns"
	ipvsproxy "github.com/svcnet/svcnet/internal/proxy/ipvs"
	"github.com/svcnet/svcnet/internal/proxy/nftables"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// withIPVS calls f with a handle on the node's IPVS.
func (c *cluster) withIPVS(f func(h *kipvs.Handle) error) {
	c.t.Helper()
	if err := netns.Do(c.node.Name, func() error {
		h, err := kipvs.Open("")
		if err != nil {
			return err
		}
		defer h.Close()
		return f(h)
	}); err != nil {
		c.t.Fatalf("read the node's IPVS: %v", err)
	}
}

// ipvsDestinations reads the real servers of the virtual server addr:port
// in the node's IPVS.
func (c *cluster) ipvsDestinations(addr string, port uint16) []kipvs.Destination {
	c.t.Helper()
	var out []kipvs.Destination
	c.withIPVS(func(h *kipvs.Handle) error {
		svcs, err := h.Services()
		if err != nil {
			return err
		}
		for _, s := range svcs {
			if s.Addr.String() == addr && s.Port == port && s.Protocol == kipvs.TCP {
				out, err = h.Destinations(s)
				return err
			}
		}
		return nil
	})
	return out
}

// testIPVSGracefulTermination: an endpoint leaves its Service while a
// client holds a connection to it. Its real server stays at weight 0
// (no new connections) and the open connection keeps working; once it
// closes, the real server goes.
func testIPVSGracefulTermination(t *testing.T, c *cluster) {
	svc := c.service("graceful", nil)
	c.slice(svc, httpPort, v1.ProtocolTCP, ready(c.pods[0]), ready(c.pods[1]))
	c.waitEndpoints(2)
	addr := net.JoinHostPort(svc.Spec.ClusterIP, "80")
	conn, err := c.pods[3].ns.DialContext(framework.Context(t, 10*time.Second), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	ask := func() (string, error) {
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: graceful\r\n\r\n"); err != nil {
			return "", err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	first, err := ask()
	if err != nil {
		t.Fatal(err)
	}
	held, _, _ := strings.Cut(first, " ")
	kept, gone := c.pods[0], c.pods[1]
	if held == "pod-0" {
		kept, gone = c.pods[1], c.pods[0]
	}
	c.slice(svc, httpPort, v1.ProtocolTCP, ready(kept))
	c.waitEndpoints(1)
	c.until("the removed real server at weight 0", 30*time.Second, func() error {
		for _, d := range c.ipvsDestinations(svc.Spec.ClusterIP, 80) {
			if d.Addr.String() == gone.ip && d.Weight == 0 && d.ActiveConns == 1 {
				return nil
			}
		}
		return fmt.Errorf("real servers %+v", c.ipvsDestinations(svc.Spec.ClusterIP, 80))
	})
	if again, err := ask(); err != nil || !strings.HasPrefix(again, gone.name+" ") {
		t.Errorf("the open connection to %s after its endpoint left: %q %v", gone.name, again, err)
	}
	if h := c.hit(c.pods[3].ns, "http://"+addr+"/", 20); h.byPod[gone.name] != 0 || h.failed != 0 {
		t.Errorf("new connections while %s drains: %v, %d failed", gone.name, h.byPod, h.failed)
	}
	// Closed with a reset: IPVS keeps the entry of a reset connection 10 s
	// (CLOSE), where an orderly close would keep it 2 min (TIME_WAIT).
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
	c.until("the drained real server deleted", time.Minute, func() error {
		for _, d := range c.ipvsDestinations(svc.Spec.ClusterIP, 80) {
			if d.Addr.String() == gone.ip {
				return fmt.Errorf("still there: %+v", d)
			}
		}
		return nil
	})
}

// testIPVSSourceHashing (--ipvs-scheduler sh): every connection of one
// client reaches the same endpoint; clients spread. c's proxy restarts
// with that scheduler.
func testIPVSSourceHashing(t *testing.T, c *cluster) {
	c.proxy.Stop()
	c.startProxy("ipvs", "--ipvs-scheduler", "sh")
	c.waitEndpoints(0)
	svc := c.service("hashed", nil)
	c.slice(svc, httpPort, v1.ProtocolTCP, ready(c.pods[0]), ready(c.pods[1]), ready(c.pods[2]))
	c.waitEndpoints(3)
	url := fmt.Sprintf("http://%s:80/", svc.Spec.ClusterIP)
	seen := map[string]bool{}
	// Two clients of different addresses: a pod, and the node itself
	// (the outside client has no route to cluster IPs).
	for _, client := range []*framework.Netns{c.pods[3].ns, c.node} {
		h := c.hit(client, url, 30)
		if h.failed > 0 || len(h.byPod) != 1 {
			t.Errorf("one client, source hashing: %v, %d failed (%v)", h.byPod, h.failed, h.lastErr)
		}
		for p := range h.byPod {
			seen[p] = true
		}
	}
	if d := c.ipvsDestinations(svc.Spec.ClusterIP, 80); len(d) != 3 {
		t.Errorf("real servers %+v, want 3", d)
	}
	t.Logf("sh scheduler: clients reached %v", seen)
}

// testIPVSModeSwitch restarts the node's proxy in one mode after another
// (ipvs, iptables, ipvs, nftables), as an operator changing
// --proxy-mode does: each start removes what the previous mode left in
// the kernel, and the Service works through the cluster IP and the node
// port in every mode. The first step restarts c's proxy in ipvs mode.
func testIPVSModeSwitch(t *testing.T, c *cluster) {
	svc := c.service("switch", nodePort(nil))
	c.slice(svc, httpPort, v1.ProtocolTCP, ready(c.pods[0]), ready(c.pods[1]))
	for i, mode := range []string{"ipvs", "iptables", "ipvs", "nftables"} {
		start := time.Now()
		c.proxy.Stop()
		stopped := time.Now()
		c.startProxy(mode)
		c.waitEndpoints(2)
		synced := time.Now()
		for _, u := range []struct {
			from *framework.Netns
			url  string
		}{
			{c.pods[1].ns, fmt.Sprintf("http://%s:80/", svc.Spec.ClusterIP)},
			{c.out, fmt.Sprintf("http://%s:%d/", nodeIP, svc.Spec.Ports[0].NodePort)},
		} {
			if h := c.hit(u.from, u.url, 20); h.failed > 0 || h.byPod["pod-0"] == 0 || h.byPod["pod-1"] == 0 {
				t.Errorf("step %d, %s mode: %s: %v, %d failed (%v)", i, mode, u.url, h.byPod, h.failed, h.lastErr)
			}
		}
		// The other modes' state goes once this mode has synced: it
		// carries traffic until then.
		var left map[string]string
		// The emulated VM is slow: a removal takes seconds.
		deadline := time.Now().Add(time.Minute)
		for {
			left = c.modeState()
			clean := true
			for m, state := range left {
				clean = clean && (m == mode || state == "")
			}
			if clean || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("step %d, %s mode: stop %v, start and sync %v, traffic and the others' state gone %v", i, mode,
			stopped.Sub(start).Round(time.Millisecond), synced.Sub(stopped).Round(time.Millisecond), time.Since(synced).Round(time.Millisecond))
		for m, state := range left {
			if m != mode && state != "" {
				t.Errorf("step %d, %s mode: the %s mode's state is left: %s", i, mode, m, state)
			}
		}
		if left[mode] == "" {
			t.Errorf("step %d, %s mode: none of its own state found", i, mode)
		}
	}
}

// modeState describes what each kernel mode has written in the node: for
// ipvs its virtual servers, kube-ipvs0, KUBE- sets and chains of its own;
// for iptables its per-service and own chains; for nftables its table.
// Empty when none.
func (c *cluster) modeState() map[string]string {
	c.t.Helper()
	var ipvs []string
	c.withIPVS(func(h *kipvs.Handle) error {
		svcs, err := h.Services()
		if len(svcs) > 0 {
			ipvs = append(ipvs, fmt.Sprintf("%d virtual servers", len(svcs)))
		}
		return err
	})
	if _, err := c.node.Try("ip", "link", "show", ipvsproxy.DummyLink); err == nil {
		ipvs = append(ipvs, ipvsproxy.DummyLink)
	}
	for _, s := range strings.Fields(c.node.Run("ipset", "list", "-n")) {
		if strings.HasPrefix(s, "KUBE-") {
			ipvs = append(ipvs, "set "+s)
		}
	}
	// Each mode's chains of its own (those the two share excepted).
	var chains []string
	for _, l := range strings.Split(c.node.Run("iptables-save"), "\n") {
		if !strings.HasPrefix(l, ":") {
			continue
		}
		switch name := strings.Fields(l)[0][1:]; {
		case strings.HasPrefix(name, "KUBE-SVC-"), strings.HasPrefix(name, "KUBE-SEP-"),
			name == "KUBE-EXTERNAL-SERVICES", name == "KUBE-NODEPORTS", name == "KUBE-PROXY-CANARY":
			chains = append(chains, name)
		case name == "KUBE-IPVS-FILTER", name == "KUBE-IPVS-OUT-FILTER", name == "KUBE-LOAD-BALANCER", name == "KUBE-NODE-PORT",
			name == "KUBE-SOURCE-RANGES-FIREWALL":
			ipvs = append(ipvs, "chain "+name)
		}
	}
	var table string
	if strings.Contains(c.node.Run("nft", "list", "tables"), nftables.TableName) {
		table = "table " + nftables.TableName
	}
	return map[string]string{"ipvs": strings.Join(ipvs, ", "), "iptables": strings.Join(chains, ", "), "nftables": table}
}
