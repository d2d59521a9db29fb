package cluster_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/loadgen"
	"github.com/svcnet/svcnet/internal/netns"
)

// fault is one thing done to the cluster while the load runs.
type fault struct {
	name string
	// dataPath: HTTP requests through the Services must not fail.
	dataPath bool
	// dns: lookups must not fail.
	dns bool
	// server is the pod (namespace/name prefix) of a data-path server
	// the fault kills: the HTTP requests in flight to its process when it
	// ended are lost with it (loadgen.LostWith), and reported apart.
	server string
	// do breaks something and returns how to tell it recovered.
	do func(t *testing.T) (recovered func() bool)
}

// TestFaultsUnderLoad kills (SIGKILL) each of the cluster's components in
// turn, letting the supervisor or the node agent restart it, and freezes
// a node for longer than its grace period, while a client sends HTTP
// requests through a NodePort and a LoadBalancer address, DNS lookups go
// to the cluster DNS, and objects are written through the API at a fixed
// rate. It checks that no acknowledged write is lost, no ClusterIP or
// NodePort is given out twice, the data path does not notice control-plane
// faults, and DNS does not notice one replica's death; it reports, per
// fault, what failed and how long recovery took (docs/reliability.md).
func TestFaultsUnderLoad(t *testing.T) {
	t.Parallel()
	c := up(t, 2, "--controller-manager-arg=--node-monitor-grace-period=20s", "--controller-manager-arg=--node-monitor-period=500ms")
	k := c.kubectl
	k.MustRun(examples(t), "apply", "-f", "-")
	k.MustRun("", "expose", "deployment", "hostnames", "--name", "hostnames-lb", "--type", "LoadBalancer", "--port", "80", "--target-port", "9376")
	k.MustRun("", "create", "namespace", "ledger")
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(c.home, c.name, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 100, 100
	rc.Timeout = 5 * time.Second
	client := kubernetes.NewForConfigOrDie(rc)
	var lbIP string
	c.until("a load-balancer address", 30*time.Second, func() bool {
		lbIP, _, _ = k.Run("", "get", "service", "hostnames-lb", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
		return lbIP != ""
	})
	c.until("3 hostnames pods ready", time.Minute, readyPods(client, "default", "app=hostnames", 3))
	c.until("2 DNS pods ready", time.Minute, readyPods(client, "kube-system", "k8s-app=kube-dns", 2))

	clientNs, node2 := "svcnet-"+c.name+"-client", "svcnet-"+c.name+"-node-2"
	targets := []loadgen.Target{
		{Name: "NodePort", URL: "http://172.18.0.11:8477/", Rate: 20, Dial: nsDialer(clientNs), Timeline: true},
		{Name: "LoadBalancer", URL: "http://" + lbIP + ":80/", Rate: 20, Dial: nsDialer(clientNs), Timeline: true},
	}
	c.untilAnswering(targets...)

	// The load, for the whole test.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	var httpResults []loadgen.Result
	var dnsOutcomes, cacheOutcomes, writeOutcomes, allocOutcomes []loadgen.Outcome
	led := newLedger(client)
	wg.Add(5)
	go func() { defer wg.Done(); httpResults = loadgen.Run(ctx, targets...) }()
	go func() {
		defer wg.Done()
		// A resolver's way: two tries (glibc's attempts:2) of
		// resolverTimeout each, each from a new socket.
		dnsOutcomes = loadgen.Every(ctx, 20, 20*2*resolverTries, func() string {
			return resolve(node2, "10.96.0.10:53", "hostnames.default.svc.cluster.local.", dns.RcodeSuccess)
		})
	}()
	go func() {
		defer wg.Done()
		// Through node-2's node-local cache, a resolver's tries too: a
		// new name every time (search-path expansions that do not exist,
		// the bulk of real DNS traffic), so each one misses the cache and
		// goes to a replica.
		var n atomic.Int64
		cacheOutcomes = loadgen.Every(ctx, 20, 20*2*resolverTries, func() string {
			return resolve(node2, "169.254.20.10:53", fmt.Sprintf("nx-%06d.default.svc.cluster.local.", n.Add(1)), dns.RcodeNameError)
		})
	}()
	go func() {
		defer wg.Done()
		writeOutcomes = loadgen.Every(ctx, 5, 5*5, led.writeConfigMap) // never saturated by 5 s requests
	}()
	go func() {
		defer wg.Done()
		allocOutcomes = loadgen.Every(ctx, 2, 2*5, func() string {
			name := led.name("alloc-%04d")
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
				Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
			_, err := client.CoreV1().Services("ledger").Create(context.Background(), svc, metav1.CreateOptions{})
			return led.record("svc/"+name, err)
		})
	}()

	killOne := func(t *testing.T, what string, parts ...string) int {
		pids := c.pidsWith(parts...)
		if len(pids) == 0 {
			t.Fatalf("no process of %s (%q)", what, parts)
		}
		if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		return pids[0]
	}
	restarted := func(old int, parts ...string) func() bool {
		return func() bool {
			pids := c.pidsWith(parts...)
			return len(pids) > 0 && !slices.Contains(pids, old)
		}
	}
	state := filepath.Join(c.home, c.name)
	proxyOf := func(node string) []string {
		// The kube-proxy DaemonSet's container, in this cluster's node.
		return []string{" proxy ", "--kubeconfig=/var/lib/kube-proxy/kubeconfig.conf", "--hostname-override=" + node,
			"netns=svcnet-" + c.name + "-" + node, notShim}
	}
	agentOf := func(node string) []string {
		return []string{" node ", state + "/in-cluster/" + node + ".kubeconfig"}
	}
	apiReady := func() bool {
		body, err := client.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		return err == nil && string(body) == "ok"
	}
	faults := []fault{
		{name: "API server (with embedded etcd)", dataPath: true, dns: true, do: func(t *testing.T) func() bool {
			old := killOne(t, "the API server", " apiserver ", state+"/apiserver")
			return func() bool { return restarted(old, " apiserver ", state+"/apiserver")() && apiReady() }
		}},
		{name: "controller manager", dataPath: true, dns: true, do: func(t *testing.T) func() bool {
			parts := []string{" controller-manager ", state + "/apiserver"}
			old := killOne(t, "the controller manager", parts...)
			return restarted(old, parts...)
		}},
		{name: "node-1's service proxy", dataPath: true, dns: true, do: func(t *testing.T) func() bool {
			old := killOne(t, "node-1's proxy", proxyOf("node-1")...)
			return func() bool {
				return restarted(old, proxyOf("node-1")...)() && c.healthz("svcnet-"+c.name+"-node-1", "http://172.18.0.11:10256/healthz")
			}
		}},
		// Through the ClusterIP, a lookup sent to the replica between its
		// death and every proxy dropping it would be refused (and its
		// retry too, one time in two) but for the node agent's crash
		// hold: the pod drops it, and the resolver's retry after its
		// timeout finds the other replica. Through the node-local cache
		// the dead replica's TCP connection is dropped too, and the
		// cache asks the other.
		{name: "one DNS replica", dataPath: true, dns: true, do: func(t *testing.T) func() bool {
			killOne(t, "a DNS replica", " dns ", "--listen=0.0.0.0:53", "netns=svcnet-"+c.name+"-*", notShim)
			time.Sleep(time.Second) // its pod to be seen not ready before waiting for both
			return readyPods(client, "kube-system", "k8s-app=kube-dns", 2)
		}},
		// A server's crash: its pod's new connections would be refused
		// (RST) until every proxy drops its endpoint; the node agent's
		// crash hold drops them instead, the client's SYN comes again a
		// second later and the proxy, having deleted the connection's
		// entry with the endpoint, sends it to a live pod.
		{name: "one hostnames server", dataPath: true, dns: true, server: "default/hostnames-", do: func(t *testing.T) func() bool {
			killOne(t, "a hostnames server", " image hostnames ", "netns=svcnet-"+c.name+"-*", notShim)
			time.Sleep(time.Second) // its pod to be seen not ready before waiting for all
			return func() bool {
				return readyPods(client, "default", "app=hostnames", 3)() && c.agentLogged(`msg="crash hold ended"`, "pod=default/hostnames-", `why="unrouted and programmed by`)
			}
		}},
		{name: "the edge load balancer", dataPath: true, dns: true, do: func(t *testing.T) func() bool {
			parts := []string{" edge ", state + "/in-cluster/proxy.kubeconfig"}
			old := killOne(t, "the edge", parts...)
			return restarted(old, parts...)
		}},
		{name: "node-2's agent", dataPath: true, dns: true, do: func(t *testing.T) func() bool {
			// Its containers outlive it and are adopted: the same starts,
			// not restarts.
			before := containerStarts(client, "node-2")
			old := killOne(t, "node-2's agent", agentOf("node-2")...)
			return func() bool {
				if !restarted(old, agentOf("node-2")...)() || !nodeReady(client, "node-2") {
					return false
				}
				// The restarted agent has seen every pod once its starts show.
				after := containerStarts(client, "node-2")
				for k, v := range before {
					if after[k] != v {
						t.Errorf("after the agent's restart, %s is %q, was %q: restarted, not adopted", k, after[k], v)
						return true
					}
				}
				return readyPods(client, "default", "app=hostnames", 3)() && readyPods(client, "kube-system", "k8s-app=kube-dns", 2)()
			}
		}},
		{name: "node-2 frozen 30 s (agent and proxy stopped)", dataPath: true, dns: true, do: func(t *testing.T) func() bool {
			pids := append(c.pidsWith(agentOf("node-2")...), c.pidsWith(proxyOf("node-2")...)...)
			for _, p := range pids {
				_ = syscall.Kill(p, syscall.SIGSTOP)
			}
			t.Cleanup(func() {
				for _, p := range pids {
					_ = syscall.Kill(p, syscall.SIGCONT)
				}
			})
			time.Sleep(30 * time.Second) // beyond the 20 s node grace period
			for _, p := range pids {
				_ = syscall.Kill(p, syscall.SIGCONT)
			}
			return func() bool {
				return nodeReady(client, "node-2") && readyPods(client, "default", "app=hostnames", 3)() && readyPods(client, "kube-system", "k8s-app=kube-dns", 2)()
			}
		}},
	}
	type window struct {
		f         fault
		from, to  time.Time
		recovered time.Duration
	}
	var windows []window
	time.Sleep(3 * time.Second) // a quiet start
	for _, f := range faults {
		from := time.Now()
		recovered := f.do(t)
		c.until("recovery from killing "+f.name, 3*time.Minute, recovered)
		took := time.Since(from)
		time.Sleep(3 * time.Second) // let stragglers land in this window
		windows = append(windows, window{f: f, from: from, to: time.Now(), recovered: took})
	}
	stop()
	wg.Wait()

	// Every acknowledged write is stored; no address or port twice.
	stored := led.storedConfigMaps(t)
	svcs, err := client.CoreV1().Services("ledger").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ips, ports := map[string]string{}, map[int32]string{}
	dups := 0
	for _, s := range svcs.Items {
		stored["svc/"+s.Name] = true
		if other, dup := ips[s.Spec.ClusterIP]; dup {
			dups++
			t.Errorf("ClusterIP %s given to both %s and %s", s.Spec.ClusterIP, other, s.Name)
		}
		ips[s.Spec.ClusterIP] = s.Name
		for _, p := range s.Spec.Ports {
			if other, dup := ports[p.NodePort]; dup {
				dups++
				t.Errorf("NodePort %d given to both %s and %s", p.NodePort, other, s.Name)
			}
			ports[p.NodePort] = s.Name
		}
	}
	lost := led.lost(t, stored)
	report := []string{fmt.Sprintf("%-46s %-26s %-26s %-26s %-26s %-16s %s", "fault", "HTTP NodePort", "HTTP LoadBalancer", "DNS via ClusterIP", "DNS via node cache", "API writes", "recovered in")}
	cell := func(sent, failed int, kinds map[string]int) string {
		s := fmt.Sprintf("%d/%d failed", failed, sent)
		if failed > 0 {
			var ks []string
			for k, n := range kinds {
				ks = append(ks, fmt.Sprintf("%s %d", k, n))
			}
			slices.Sort(ks)
			s += " (" + strings.Join(ks, ", ") + ")"
		}
		return s
	}
	// The kills of servers: the requests in flight to their processes
	// (sent before, or in an earlier window) are lost with them, and told
	// in the kill's window.
	kills := make([]loadgen.Kill, len(windows))
	for k, w := range windows {
		if w.f.server == "" {
			continue
		}
		kills[k] = loadgen.Kill{At: w.from, Ended: c.exitedAt(w.from, w.f.server)}
		if kills[k].Ended.IsZero() {
			t.Errorf("%s: no node agent logged the exit of %s…", w.f.name, w.f.server)
		}
	}
	kept := make([][]loadgen.Outcome, len(httpResults))
	lostBy := make([][][]loadgen.Outcome, len(httpResults))
	for i, r := range httpResults {
		kept[i], lostBy[i] = loadgen.SplitLost(r.Outcomes, kills)
	}
	for k, w := range windows {
		var cells []string
		for i := range httpResults {
			rest, inFlight := kept[i], lostBy[i][k]
			sent, failed, kinds := loadgen.Count(rest, w.from, w.to)
			cells = append(cells, cell(sent, failed, kinds)+inFlightNote(len(inFlight)))
			if len(inFlight) > 0 {
				t.Logf("%s: %d request(s) through the %s in flight to the killed server when its process ended at %s, lost with it: %s",
					w.f.name, len(inFlight), targets[i].Name, kills[k].Ended.Format("15:04:05.000"), failedAt(inFlight, time.Time{}, w.to, nil))
			}
			if w.f.dataPath && failed > 0 {
				t.Errorf("%s: %d of %d requests through the %s failed: %v (%s)", w.f.name, failed, sent, targets[i].Name, kinds, failedAt(rest, w.from, w.to, httpResults[i].Stalls))
			}
		}
		sent, failed, kinds := loadgen.Count(dnsOutcomes, w.from, w.to)
		cells = append(cells, cell(sent, failed, kinds))
		if w.f.dns && failed > 0 {
			t.Errorf("%s: %d of %d DNS lookups failed: %v", w.f.name, failed, sent, kinds)
		}
		sent, failed, kinds = loadgen.Count(cacheOutcomes, w.from, w.to)
		cells = append(cells, cell(sent, failed, kinds))
		if w.f.dns && failed > 0 {
			t.Errorf("%s: %d of %d DNS lookups through the node-local cache failed: %v", w.f.name, failed, sent, kinds)
		}
		ws, wf, _ := loadgen.Count(append(slices.Clone(writeOutcomes), allocOutcomes...), w.from, w.to)
		cells = append(cells, fmt.Sprintf("%d/%d failed", wf, ws))
		report = append(report, fmt.Sprintf("%-46s %-26s %-26s %-26s %-26s %-16s %.1fs", w.f.name, cells[0], cells[1], cells[2], cells[3], cells[4], w.recovered.Seconds()))
	}
	report = append(report, fmt.Sprintf("acknowledged writes %d, lost %d; Services created %d, ClusterIPs or NodePorts given twice: %d",
		led.acknowledged(), lost, len(svcs.Items), dups))
	t.Logf("faults under load (20 HTTP req/s per path, 20 DNS lookups/s through the ClusterIP and 20 through node-2's cache, 7 API writes/s):\n%s", strings.Join(report, "\n"))
	if path := os.Getenv("SVCNET_CHAOS_REPORT"); path != "" {
		_ = os.WriteFile(path, []byte(strings.Join(report, "\n")+"\n"), 0o644)
	}
}

// failedAt lists when the failed requests of [from, to) were sent and
// how long they took, and the client's own stalls in that window, to be
// read against the components' logs.
func failedAt(outcomes []loadgen.Outcome, from, to time.Time, stalls []loadgen.Stall) string {
	var out []string
	for _, o := range outcomes {
		if o.Kind != "" && !o.At.Before(from) && o.At.Before(to) {
			out = append(out, fmt.Sprintf("%s at %s for %v", o.Kind, o.At.Format("15:04:05.000"), o.Took.Round(time.Millisecond)))
		}
	}
	for _, st := range stalls {
		if st.At.Before(to) && from.Before(st.At.Add(st.Len)) {
			out = append(out, st.String())
		}
	}
	return strings.Join(out, "; ")
}

// resolverTimeout and resolverTries are glibc's defaults (resolv.conf's
// timeout:5 and attempts:2): the DNS client of the measurements is a
// pod's.
const (
	resolverTimeout = 5 * time.Second
	resolverTries   = 2
)

// lookup asks server for name's A record from inside ns, once, and
// returns "" when the answer has rcode (and records, for NOERROR), else
// the kind of failure.
func lookup(ns, server, name string, rcode int) string {
	ctx, cancel := context.WithTimeout(context.Background(), resolverTimeout)
	defer cancel()
	conn, err := netns.DialContext(ctx, ns, "udp", server)
	if err != nil {
		return loadgen.Classify(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(resolverTimeout))
	dc := &dns.Conn{Conn: conn}
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	if err := dc.WriteMsg(q); err != nil {
		return loadgen.Classify(err)
	}
	r, err := dc.ReadMsg()
	if err != nil {
		return loadgen.Classify(err)
	}
	if r.Rcode != rcode || (rcode == dns.RcodeSuccess && len(r.Answer) == 0) {
		return "rcode " + dns.RcodeToString[r.Rcode]
	}
	return ""
}

func apiErrorKind(err error) string {
	if st, ok := err.(apierrors.APIStatus); ok {
		return "api " + strconv.Itoa(int(st.Status().Code))
	}
	return loadgen.Classify(err)
}

// pidsWith lists the processes whose command line contains every part
// (and none of the parts written "!part"); a part "netns=NAME" asks for
// processes in that network namespace, "netns=PREFIX*" in any namespace
// named so.
func (c *localCluster) pidsWith(parts ...string) []int {
	var inNetns map[string]bool
	parts = slices.DeleteFunc(slices.Clone(parts), func(p string) bool {
		pattern, ok := strings.CutPrefix(p, "netns=")
		if !ok {
			return false
		}
		inNetns = map[string]bool{}
		names, _ := filepath.Glob("/run/netns/" + pattern)
		for _, name := range names {
			var st syscall.Stat_t
			if syscall.Stat(name, &st) == nil {
				inNetns[fmt.Sprintf("net:[%d]", st.Ino)] = true
			}
		}
		return true
	})
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		cmdline := " " + strings.ReplaceAll(string(raw), "\x00", " ")
		if inNetns != nil {
			if ns, err := os.Readlink("/proc/" + e.Name() + "/ns/net"); err != nil || !inNetns[ns] {
				continue
			}
		}
		all := true
		for _, p := range parts {
			if not, ok := strings.CutPrefix(p, "!"); ok {
				if strings.Contains(cmdline, not) {
					all = false
				}
			} else if !strings.Contains(cmdline, p) {
				all = false
			}
		}
		if all {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// inFlightNote is a report cell's note of requests lost with a killed
// server.
func inFlightNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" +%d in flight at its end", n)
}

// exitedAt is when a node agent saw a container of the pod whose
// namespace/name starts with pod exit, the first time after since
// (millisecond precision, from its log); zero if none did.
func (c *localCluster) exitedAt(since time.Time, pod string) time.Time {
	var first time.Time
	logs, _ := filepath.Glob(filepath.Join(c.home, c.name, "logs", "node-*.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		for line := range strings.SplitSeq(string(data), "\n") {
			if !strings.Contains(line, `msg="container exited"`) || !strings.Contains(line, " pod="+pod) {
				continue
			}
			ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
			at, err := time.Parse(time.RFC3339Nano, ts)
			if err == nil && at.After(since) && (first.IsZero() || at.Before(first)) {
				first = at
			}
		}
	}
	return first
}

// agentLogged reports whether a line of a node agent's log has every
// part.
func (c *localCluster) agentLogged(parts ...string) bool {
	logs, _ := filepath.Glob(filepath.Join(c.home, c.name, "logs", "node-*.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		for line := range strings.SplitSeq(string(data), "\n") {
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
				return true
			}
		}
	}
	return false
}

// healthz reports whether url answers 200 from inside ns.
func (c *localCluster) healthz(ns, url string) bool {
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: nsDialer(ns)}}
	resp, err := hc.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// nsDialer connects from inside the named network namespace.
func nsDialer(ns string) loadgen.Dialer {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return netns.DialContext(ctx, ns, network, addr)
	}
}

// untilAnswering waits until every target answers every request of a
// short burst, before a measurement starts.
func (c *localCluster) untilAnswering(targets ...loadgen.Target) {
	c.t.Helper()
	for _, tg := range targets {
		c.until(tg.Name+" to answer", 30*time.Second, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			probe := tg
			probe.Rate = 10
			r := loadgen.Run(ctx, probe)[0]
			return r.Sent > 0 && r.OK == r.Sent
		})
	}
}
