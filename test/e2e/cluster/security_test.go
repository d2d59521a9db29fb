package cluster_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// socket is one listening socket of the cluster.
type socket struct {
	where string // host, underlay, node, pod
	netns string // "" for the host's
	proto string // tcp, udp
	ip    string // as ss prints it: 127.0.0.1, 172.18.0.11, *
	port  int
	cmd   string // the owning process's command line
}

func (s socket) String() string {
	ns := s.netns
	if ns == "" {
		ns = "host"
	}
	return fmt.Sprintf("%s %s %s:%d (%s)", ns, s.proto, s.ip, s.port, s.cmd)
}

// Each listener must be one of these. A class says who may use it and is
// checked by a probe from an unauthenticated client.
const (
	classAuthn   = "requires credentials (401/403 without)"
	classMTLS    = "requires a client certificate (TLS handshake fails without)"
	classHealth  = "health only"
	classMetrics = "Prometheus metrics"
	classDNS     = "DNS service traffic"
	classHTTP    = "the pod's own service traffic"
	classIngress = "ingress traffic (404 for hosts no Ingress names)"
)

// TestClusterSecurity checks, on one running cluster, what stands
// between its users and the machine: every listening socket accounted
// for, Secrets encrypted in etcd, pods confined.
func TestClusterSecurity(t *testing.T) {
	t.Parallel()
	c := upWithIngress(t, 1)
	c.kubectl.MustRun(examples(t), "apply", "-f", "-")
	c.kubectl.MustRun(confinedPods, "apply", "-f", "-")
	c.waitHostnames(time.Minute)
	c.until("the cluster DNS ready", time.Minute, func() bool {
		out, _, _ := c.kubectl.Run("", "-n", "kube-system", "get", "deployment", "svcnet-dns", "-o", "jsonpath={.status.readyReplicas}")
		return out != "" && out != "0"
	})
	apiDir := filepath.Join(c.home, c.name, "apiserver")
	etcdClient, etcdPeer := framework.EtcdPorts(t, apiDir)
	t.Run("every listener accounted for", func(t *testing.T) { c.listenersAccountedFor(t, c.apiPort(), etcdClient, etcdPeer) })
	t.Run("Secrets encrypted at rest", func(t *testing.T) {
		c := c.in(t)
		c.kubectl.MustRun("", "create", "secret", "generic", "db", "--from-literal=password=svcnet-plain-text")
		raw := framework.EtcdGet(t, apiDir, "/registry/secrets/default/db")
		if !bytes.HasPrefix(raw, []byte("k8s:enc:secretbox:v1:key1:")) || bytes.Contains(raw, []byte("svcnet-plain-text")) {
			t.Errorf("the Secret in etcd is not secretbox-encrypted: %q", raw[:min(len(raw), 60)])
		}
	})
	t.Run("pods confined", func(t *testing.T) { c.podsConfined(t) })
}

// confinedPods: one asking for nothing, one for a capability, one
// privileged, one for root without being privileged.
const confinedPods = `
apiVersion: v1
kind: Pod
metadata: {name: plain}
spec:
  containers: [{name: c, image: host, command: [sleep, "3600"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: netadmin}
spec:
  securityContext: {runAsUser: 4321, supplementalGroups: [5555]}
  containers:
  - name: c
    image: host
    command: [sleep, "3600"]
    securityContext: {capabilities: {add: [NET_ADMIN], drop: [ALL]}}
---
apiVersion: v1
kind: Pod
metadata: {name: privileged}
spec:
  containers:
  - {name: c, image: host, command: [sleep, "3600"], securityContext: {privileged: true}}
---
apiVersion: v1
kind: Pod
metadata: {name: wants-root}
spec:
  containers:
  - {name: c, image: host, command: [sleep, "3600"], securityContext: {runAsUser: 0}}
`

// podsConfined: from inside each pod (kubectl exec, which is confined as
// the container is), what it can and cannot do to the machine.
func (c *localCluster) podsConfined(t *testing.T) {
	k := c.kubectl
	c.untilRunning("the confined pods", "plain", "netadmin", "privileged")
	stateDir := filepath.Join(c.home, c.name)
	try := func(pod, script string) (string, bool) {
		out, errOut, err := k.Run("", "exec", pod, "--", "sh", "-c", script)
		return strings.TrimSpace(out + errOut), err == nil
	}
	cases := []struct {
		pod, what, script string
		allowed           bool
	}{
		{"plain", "write /etc", "touch /etc/svcnet-confined", false},
		{"plain", "write /var/tmp in its own root (the machine's stays as it is, checked below)", "touch /var/tmp/svcnet-confined", true},
		{"plain", "read the cluster's credentials", "ls " + stateDir, false},
		{"plain", "write its private /tmp", "echo x > /tmp/f && cat /tmp/f", true},
		{"plain", "change the pod's network", "ip link set lo mtu 1400", false},
		// Process 1 is the container's own; the machine's processes are
		// outside its PID namespace.
		{"plain", "signal a process of the machine", fmt.Sprintf("kill -0 %d", os.Getpid()), false},
		{"plain", "enter another network namespace", fmt.Sprintf("nsenter --net=/proc/%d/ns/net true", os.Getpid()), false},
		{"plain", "hold no capability at all", "grep -q 'CapBnd:.*0000000000000000' /proc/self/status", true},
		{"plain", "reach a Service", "curl -s --max-time 2 hostnames", true},
		{"netadmin", "run as the user and groups asked", "test \"$(id -u) $(id -G)\" = '4321 4321 5555'", true},
		{"netadmin", "change its own network with NET_ADMIN", "ip link set lo mtu 1400", true},
		{"netadmin", "still not write /etc", "touch /etc/svcnet-confined", false},
		{"netadmin", "not have what it did not add", "grep -q 'CapBnd:.*0000000000001000' /proc/self/status", true},
		{"privileged", "run as root", "test $(id -u) = 0", true},
		{"privileged", "change its network", "ip link set lo mtu 1400", true},
	}
	for _, tc := range cases {
		out, ok := try(tc.pod, tc.script)
		if ok != tc.allowed {
			t.Errorf("%s: %s: allowed=%v, want %v (%s)", tc.pod, tc.what, ok, tc.allowed, out)
		}
	}
	if _, err := os.Stat("/var/tmp/svcnet-confined"); err == nil {
		os.Remove("/var/tmp/svcnet-confined")
		t.Error("a pod wrote the machine's /var/tmp")
	}
	if _, err := os.Stat("/etc/svcnet-confined"); err == nil {
		os.Remove("/etc/svcnet-confined")
		t.Error("a pod wrote the machine's /etc")
	}
	// Logs only of the pod's containers: the name is not a path.
	if out, errOut, err := k.Run("", "logs", "plain", "-c", "../../../logs/apiserver"); err == nil || !strings.Contains(errOut, "is not valid") {
		t.Errorf("kubectl logs with a path for container: err %v, %s%s", err, out, errOut)
	}
	// Root without privileged is refused, with the reason.
	c.until("wants-root to be refused", 30*time.Second, func() bool {
		out, _, _ := k.Run("", "get", "pod", "wants-root", "-o", "jsonpath={.status.containerStatuses[0].state.waiting.reason}: {.status.containerStatuses[0].state.waiting.message}")
		return strings.HasPrefix(out, "CreateContainerConfigError: ") && strings.Contains(out, "needs privileged")
	})
}

// listenersAccountedFor lists every listening socket of the cluster — in
// the host's namespace (the cluster's processes only) and in every
// namespace of the cluster — and requires each to be one the table
// knows, doing what its class says to an unauthenticated client: from
// the host's loopback for host sockets, from the client namespace for the
// underlay's and nodes', from the node for pods'. A new listener fails
// this test until it is added here and to docs/security.md.
func (c *localCluster) listenersAccountedFor(t *testing.T, apiPort, etcdClient, etcdPeer int) {
	type rule struct {
		where, proto string
		port         int
		class        string
	}
	rules := []rule{
		{"host", "tcp", apiPort, classAuthn},
		{"host", "tcp", etcdClient, classMTLS},
		{"host", "tcp", etcdPeer, classMTLS},
		{"underlay", "tcp", 6443, classAuthn},
		{"node", "tcp", 10250, classAuthn},
		{"node", "tcp", 10249, classMetrics},
		{"node", "tcp", 10256, classHealth},
		{"node", "udp", 53, classDNS},
		{"node", "tcp", 53, classDNS},
		{"node", "tcp", 9253, classMetrics},
		{"pod", "udp", 53, classDNS},
		{"pod", "tcp", 53, classDNS},
		{"pod", "tcp", 8181, classHealth},
		{"pod", "tcp", 9153, classMetrics},
		{"pod", "tcp", 9376, classHTTP},
		{"pod", "tcp", 80, classIngress},
		{"pod", "tcp", 443, classIngress},
		{"pod", "tcp", 10254, classMetrics},
	}
	sockets := c.listeningSockets()
	if len(sockets) < len(rules) {
		t.Fatalf("found only %d listening sockets:\n%v", len(sockets), sockets)
	}
	covered := map[int]bool{}
	for _, s := range sockets {
		i := slices.IndexFunc(rules, func(r rule) bool { return r.where == s.where && r.proto == s.proto && r.port == s.port })
		if i < 0 {
			t.Errorf("unaccounted listener: %v", s)
			continue
		}
		covered[i] = true
		if s.where == "host" && s.ip != "127.0.0.1" {
			t.Errorf("%v: the host's sockets must be on loopback only", s)
		}
		if err := c.probe(s, rules[i].class); err != nil {
			t.Errorf("%v, %s: %v", s, rules[i].class, err)
		}
	}
	for i, r := range rules {
		if !covered[i] {
			t.Errorf("no listener for %+v: the table is out of date", r)
		}
	}

}

// apiPort is the API server's port on the host's loopback.
func (c *localCluster) apiPort() int {
	c.t.Helper()
	out := c.kubectl.MustRun("", "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}")
	i := strings.LastIndex(out, ":")
	port, err := strconv.Atoi(strings.TrimSpace(out[i+1:]))
	if err != nil {
		c.t.Fatalf("server %q: %v", out, err)
	}
	return port
}

var ssUsers = regexp.MustCompile(`pid=(\d+)`)

// listeningSockets lists the cluster's listening sockets with ss: in the
// host's namespace those of the cluster's processes, in the cluster's
// namespaces all.
func (c *localCluster) listeningSockets() []socket {
	c.t.Helper()
	mine := map[string]bool{}
	if out, err := exec.Command("pgrep", "-f", c.home).Output(); err == nil {
		for _, p := range strings.Fields(string(out)) {
			mine[p] = true
		}
	}
	namespaces, err := netns.List(NetnsPrefixOf(c.name))
	if err != nil {
		c.t.Fatal(err)
	}
	var all []socket
	for _, ns := range append([]string{""}, namespaces...) {
		argv := []string{"ss", "-Hlntup"}
		if ns != "" {
			argv = append([]string{"ip", "netns", "exec", ns}, argv...)
		}
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err != nil {
			c.t.Fatalf("%v: %v", argv, err)
		}
		seen := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			if len(f) < 5 {
				continue
			}
			pids := ssUsers.FindAllStringSubmatch(line, -1)
			if ns == "" && !slices.ContainsFunc(pids, func(m []string) bool { return mine[m[1]] }) {
				continue // not the cluster's
			}
			host, portStr, err := net.SplitHostPort(f[4])
			if err != nil {
				c.t.Fatalf("ss line %q: %v", line, err)
			}
			port, _ := strconv.Atoi(portStr)
			s := socket{where: c.kindOf(ns), netns: ns, proto: f[0], ip: host, port: port}
			if len(pids) > 0 {
				cmdline, _ := os.ReadFile("/proc/" + pids[0][1] + "/cmdline")
				args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
				s.cmd = strings.Join(args[:min(3, len(args))], " ")
			}
			// SO_REUSEPORT sockets (one per DNS worker) are one listener.
			key := fmt.Sprintf("%s/%s/%d", s.proto, s.ip, s.port)
			if !seen[key] {
				seen[key] = true
				all = append(all, s)
			}
		}
	}
	return all
}

// NetnsPrefixOf is the prefix of every namespace of cluster name.
func NetnsPrefixOf(name string) string { return "svcnet-" + name + "-" }

// kindOf tells a cluster namespace's role from its name:
// svcnet-NAME-net (underlay), -client, -edge, -node-N, -node-N-<pod hash>.
func (c *localCluster) kindOf(ns string) string {
	rest := strings.TrimPrefix(ns, NetnsPrefixOf(c.name))
	switch {
	case ns == "":
		return "host"
	case rest == "net":
		return "underlay"
	case rest == "client", rest == "edge":
		return rest
	case regexp.MustCompile(`^node-\d+$`).MatchString(rest):
		return "node"
	case regexp.MustCompile(`^node-\d+-[0-9a-f]+$`).MatchString(rest):
		return "pod"
	}
	return "unknown namespace " + ns
}

// probe checks that s behaves as its class says, for a client without
// credentials.
func (c *localCluster) probe(s socket, class string) error {
	from, addr := c.vantage(s)
	dial := func(ctx context.Context, network, a string) (net.Conn, error) {
		if from == "" {
			var d net.Dialer
			return d.DialContext(ctx, network, a)
		}
		return netns.DialContext(ctx, from, network, a)
	}
	// No client certificate, no token; the server's certificate is not
	// what is checked here.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(url string) (int, string, error) {
		resp, err := hc.Get(url)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return resp.StatusCode, string(b), nil
	}
	switch class {
	case classAuthn:
		code, body, err := get("https://" + addr + "/api/v1/namespaces/kube-system/secrets")
		if err != nil {
			return err
		}
		if code != http.StatusUnauthorized && code != http.StatusForbidden {
			return fmt.Errorf("answered %d without credentials: %.200s", code, body)
		}
	case classMTLS:
		code, _, err := get("https://" + addr + "/version")
		if err == nil {
			return fmt.Errorf("answered %d without a client certificate", code)
		}
		if code, _, err := get("http://" + addr + "/version"); err == nil && code == http.StatusOK {
			return fmt.Errorf("answers plain HTTP")
		}
	case classHealth:
		code, _, err := get("http://" + addr + "/healthz")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("/healthz: %d %v", code, err)
		}
		if code, _, _ := get("http://" + addr + "/debug/pprof/"); code == http.StatusOK {
			return fmt.Errorf("serves /debug/pprof")
		}
	case classMetrics:
		code, body, err := get("http://" + addr + "/metrics")
		if err != nil || code != http.StatusOK || !strings.Contains(body, "# TYPE") {
			return fmt.Errorf("/metrics: %d %v", code, err)
		}
		if code, _, _ := get("http://" + addr + "/debug/pprof/"); code == http.StatusOK {
			return fmt.Errorf("serves /debug/pprof")
		}
	case classDNS:
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		conn, err := dial(ctx, s.proto, addr)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
		dc := &dns.Conn{Conn: conn}
		q := new(dns.Msg)
		q.SetQuestion("kubernetes.default.svc.cluster.local.", dns.TypeA)
		if err := dc.WriteMsg(q); err != nil {
			return err
		}
		r, err := dc.ReadMsg()
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			return fmt.Errorf("no answer: %v %v", r, err)
		}
	case classHTTP:
		code, _, err := get("http://" + addr + "/")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("GET /: %d %v", code, err)
		}
	case classIngress:
		scheme := "http"
		if s.port == 443 {
			scheme = "https"
		}
		code, _, err := get(scheme + "://" + addr + "/")
		if err != nil || code != http.StatusNotFound {
			return fmt.Errorf("GET %s://%s/: %d %v", scheme, addr, code, err)
		}
	default:
		return fmt.Errorf("no probe for class %q", class)
	}
	return nil
}

// vantage is where an outside client reaches s from, and the address.
func (c *localCluster) vantage(s socket) (from, addr string) {
	ip := s.ip
	switch s.where {
	case "host":
		return "", net.JoinHostPort(ip, strconv.Itoa(s.port))
	case "pod":
		// The node reaches its pods on their address.
		if ip == "*" || ip == "0.0.0.0" {
			ip = podIP(c.t, s.netns)
		}
		node := s.netns[:strings.LastIndex(s.netns, "-")]
		return node, net.JoinHostPort(ip, strconv.Itoa(s.port))
	default:
		if a, err := netip.ParseAddr(ip); err == nil && (a.IsLoopback() || a.IsLinkLocalUnicast()) {
			// The node-local DNS cache: its node's own processes and
			// pods reach it, nothing outside the node.
			return s.netns, net.JoinHostPort(ip, strconv.Itoa(s.port))
		}
		if ip == "*" || ip == "0.0.0.0" {
			ip = podIP(c.t, s.netns) // the node's address on the underlay
		}
		return NetnsPrefixOf(c.name) + "client", net.JoinHostPort(ip, strconv.Itoa(s.port))
	}
}

func podIP(t testing.TB, ns string) string {
	out, err := exec.Command("ip", "-n", ns, "-4", "-o", "addr", "show", "dev", "eth0").Output()
	if err != nil {
		t.Fatalf("address of %s: %v", ns, err)
	}
	f := strings.Fields(string(out))
	for i, w := range f {
		if w == "inet" && i+1 < len(f) {
			return strings.Split(f[i+1], "/")[0]
		}
	}
	t.Fatalf("no IPv4 on eth0 in %s: %s", ns, out)
	return ""
}
