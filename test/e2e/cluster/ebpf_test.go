package cluster_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/bpflb"
	"github.com/svcnet/svcnet/internal/loadgen"
)

// TestEBPFMode runs the reference scenario through the ebpf mode: from
// outside, every node's NodePort reaches all the pods (the tc programs
// and the masquerade rule); from a pod, the cluster IP, the Service's
// names (DNS over UDP, then TCP) and the node's own node port do,
// translated at the socket (curl sees the service's address as its
// peer); scaling and a deleted pod are seen; no rule of a proxy is on
// the nodes; the programs are attached to the nodes' cgroups and never
// to the root, and nothing of them is left after down.
func TestEBPFMode(t *testing.T) {
	t.Parallel()
	c := up(t, 2, "--proxy-mode", "ebpf")
	k := c.kubectl
	k.MustRun(examples(t), "apply", "-f", "-")
	pods, want := c.waitHostnames(time.Minute)
	c.reachReference(pods, want, []string{"172.18.0.11", "172.18.0.12"}, 12, "2", 30*time.Second, "")
	from := "default/" + pods[0]
	hostIP := k.MustRun("", "get", "pod", pods[0], "-o", "jsonpath={.status.hostIP}")
	clusterIP := k.MustRun("", "get", "service", "hostnames", "-o", "jsonpath={.spec.clusterIP}")
	c.until("the pod's own node's NodePort from the pod to reach all pods", 30*time.Second, func() bool {
		return c.answeredBy(want, c.names(from, 12, "curl", "-s", "--max-time", "2", hostIP+":8477"))
	})
	// The peer the socket sees is the Service's: getpeername is
	// translated back.
	peer, err := c.exec(from, "curl", "-s", "--max-time", "2", "-o", "/dev/null", "-w", "%{remote_ip}:%{remote_port}", clusterIP)
	if err != nil || strings.TrimSpace(peer) != clusterIP+":80" {
		t.Errorf("curl's peer %q (%v), want the cluster IP %s:80", peer, err, clusterIP)
	}
	// No Service has no endpoint: refused at once.
	k.MustRun("", "create", "service", "clusterip", "empty", "--tcp=80:8080")
	emptyIP := k.MustRun("", "get", "service", "empty", "-o", "jsonpath={.spec.clusterIP}")
	c.until("a Service without endpoints to refuse connections", 30*time.Second, func() bool {
		out, err := c.exec(from, "curl", "-s", "--max-time", "2", "-o", "/dev/null", "-w", "%{exitcode}", emptyIP)
		// curl's 7: could not connect (refused), not 28 (timed out).
		return err != nil && strings.Contains(out, "7")
	})
	// svcnet proxy trace reads the live maps: each pod a third, from a
	// pod at the socket, from outside masqueraded.
	group := filepath.Join(cgroup2(t), "svcnet-"+c.name+"-node-1")
	podIPs := strings.Fields(k.MustRun("", "get", "pods", "-l", "app=hostnames", "-o", "jsonpath={.items[*].status.podIP}"))
	for _, tc := range []struct{ src, dst, want string }{
		{"10.244.1.5", clusterIP + ":80/tcp", "source kept"},
		{"172.18.0.2", "172.18.0.11:8477/tcp", "masqueraded"},
	} {
		out, err := c.exec("node/node-1", c.bin, "proxy", "trace", "--src", tc.src, "--dst", tc.dst,
			"--ebpf-cgroup", group, "--cluster-cidr", "10.244.0.0/16")
		for _, ip := range podIPs {
			if err != nil || !strings.Contains(out, "33.33%  delivered to "+ip+":9376 (DNAT), "+tc.want) {
				t.Errorf("trace %s -> %s on node-1 (%v): no third to %s, %s:\n%s", tc.src, tc.dst, err, ip, tc.want, out)
			}
		}
	}
	c.scaleAndDelete()
	for _, node := range []string{"node/node-1", "node/node-2"} {
		if rules, err := c.exec(node, "iptables-save", "-t", "nat"); err != nil || strings.Contains(rules, "KUBE-SVC-") || strings.Contains(rules, "KUBE-SERVICES") {
			t.Errorf("proxy rules on an ebpf node %s (%v):\n%s", node, err, rules)
		}
		if out, _ := c.exec(node, "nft", "list", "tables"); strings.Contains(out, "kube-proxy") {
			t.Errorf("kube-proxy's nftables table on an ebpf node %s:\n%s", node, out)
		}
	}
	groups := ebpfGroups(t)
	var ours []string
	for _, g := range groups {
		if strings.HasPrefix(filepath.Base(g), "svcnet-"+c.name+"-") {
			ours = append(ours, filepath.Base(g))
		}
	}
	if len(ours) != 2 {
		t.Errorf("programs attached to %v, want the groups of the cluster's two nodes", groups)
	}
	c.down()
	for _, g := range ebpfGroups(t) {
		if strings.Contains(g, "svcnet-"+c.name+"-") {
			t.Errorf("programs still attached to %s after down", g)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(cgroup2(t), "svcnet-"+c.name+"-*")); len(left) > 0 {
		t.Errorf("cgroups left after down: %v", left)
	}
	// No link of the packet programs either (tcx links are listed with
	// their program's name).
	if out, err := exec.Command("bpftool", "link", "show").CombinedOutput(); err != nil || strings.Contains(string(out), "from_net") || strings.Contains(string(out), "to_net") {
		t.Errorf("links of the packet programs after down (%v):\n%s", err, out)
	}
}

// cgroup2 is where the machine mounts its cgroup2 hierarchy.
func cgroup2(t *testing.T) string {
	mount, err := bpflb.Cgroup2Mount()
	if err != nil {
		t.Fatal(err)
	}
	return mount
}

// ebpfGroups are the cgroups with a connect4 program attached, as
// bpftool lists them; the hierarchy's root is never one.
func ebpfGroups(t *testing.T) []string {
	t.Helper()
	b, err := exec.Command("bpftool", "cgroup", "tree", cgroup2(t)).CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("bpftool: %v\n%s", err, out)
	}
	var groups []string
	cur := ""
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, "/") {
			cur = line
			continue
		}
		if strings.Contains(line, "cgroup_inet4_connect") && cur != "" {
			if cur == cgroup2(t) {
				t.Errorf("a connect4 program attached to the hierarchy's root: %s", line)
			}
			groups = append(groups, cur)
		}
	}
	return groups
}

// TestEBPFRolloutLosesNoRequest: the ebpf mode's packet path through a
// rollout. The outside client drives the NodePort and the LoadBalancer
// address at a fixed rate while `kubectl rollout restart` replaces the
// reference Deployment's pods, drained as in TestRolloutLosesNoRequest (a
// preStop hook; or held until every proxy has programmed the removal):
// no request may fail. (The cluster IP from a node's own process is not
// the ebpf mode's to translate: only the node group's processes are.)
func TestEBPFRolloutLosesNoRequest(t *testing.T) {
	t.Parallel()
	c := up(t, 2, "--proxy-mode", "ebpf")
	k := c.kubectl
	k.MustRun(examples(t), "apply", "-f", "-")
	lbIP := c.exposeLoadBalancer()
	client := "svcnet-" + c.name + "-client"
	targets := []loadgen.Target{
		{Name: "NodePort", URL: "http://172.18.0.11:8477/", Rate: 20, Dial: nsDialer(client)},
		{Name: "LoadBalancer", URL: "http://" + lbIP + ":80/", Rate: 20, Dial: nsDialer(client)},
	}
	for _, v := range []struct{ name, drain, template string }{
		{"readiness probe, preStop sleep 5 s", "programmed", `
        readinessProbe:
          httpGet: {path: /, port: 9376}
          periodSeconds: 1
        lifecycle:
          preStop:
            sleep: {seconds: 5}`},
		{"no probe, exits at SIGTERM", "programmed", ""},
	} {
		results, took := c.restartHostnames(targets, v.drain, v.template)
		for _, r := range results {
			t.Logf("%-40s %-12s %4d sent %3d failed  %v (rollout %.0fs)", v.name, r.Name, r.Sent, r.Failed(), r.Errors, took.Seconds())
			if r.Sent < 20 || len(r.Answers) < 4 {
				t.Errorf("%s via %s: %d requests answered by %v: the measurement did not see the rollout", v.name, r.Name, r.Sent, r.Answers)
			}
			if r.Failed() > 0 {
				t.Errorf("%s via %s: %s", v.name, r.Name, r)
			}
		}
	}
}
