package cluster_test

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

func examples(t *testing.T) string { return example(t, "hostnames.yaml") }

func example(t *testing.T, name string) string {
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestReferenceScenario is the reference documents' acceptance scenario on a 3-node cluster.
// waitHostnames waits until the reference Deployment's 3 pods are ready
// and returns their names, sorted, and joined as spread joins them.
func (c *localCluster) waitHostnames(timeout time.Duration) ([]string, string) {
	c.t.Helper()
	c.until("3 ready hostnames pods", timeout, func() bool {
		out, _, _ := c.kubectl.Run("", "get", "deployment", "hostnames", "-o", "jsonpath={.status.readyReplicas}")
		return out == "3"
	})
	pods := podNames(c, "app=hostnames")
	sort.Strings(pods)
	return pods, strings.Join(pods, ",")
}

// spread is the pods that answered, sorted and comma-joined.
func spread(seen map[string]int) string {
	var got []string
	for n := range seen {
		got = append(got, n)
	}
	sort.Strings(got)
	return strings.Join(got, ",")
}

// answeredBy reports whether the pods that answered are exactly want
// (spread's form), and keeps what answered for a timeout's message.
func (c *localCluster) answeredBy(want string, seen map[string]int) bool {
	if got := spread(seen); got != want {
		c.lastErr = fmt.Errorf("answers by pod %v, want each of %s", seen, want)
		return false
	}
	return true
}

// reachReference checks the reference scenario's paths: from outside,
// every node's NodePort reaches all the pods; from a pod (from, one with
// curl, or else the first hostnames pod), the cluster IP does, and the Service's three names answer. Each check gets
// tries requests with curl's --max-time maxTime, retried until timeout.
func (c *localCluster) reachReference(pods []string, want string, nodes []string, tries int, maxTime string, timeout time.Duration, from string) {
	c.t.Helper()
	for _, node := range nodes {
		c.until("NodePort on "+node+" to reach all pods", timeout, func() bool {
			return c.answeredBy(want, c.names("client", tries, "curl", "-s", "--max-time", maxTime, node+":8477"))
		})
	}
	clusterIP := c.kubectl.MustRun("", "get", "service", "hostnames", "-o", "jsonpath={.spec.clusterIP}")
	from = "default/" + cmp.Or(from, pods[0])
	c.until("cluster IP to reach all pods", timeout, func() bool {
		return c.answeredBy(want, c.names(from, tries, "curl", "-s", "--max-time", maxTime, clusterIP+":80"))
	})
	for _, name := range []string{"hostnames", "hostnames.default", "hostnames.default.svc.cluster.local"} {
		c.until("DNS name "+name+" to reach the pods", timeout, func() bool {
			out, err := c.exec(from, "curl", "-s", "--max-time", maxTime, name+":80")
			return err == nil && strings.TrimSpace(out) != "" && strings.Contains(want, strings.TrimSpace(out))
		})
	}
}

func TestReferenceScenario(t *testing.T) {
	t.Parallel()
	c := up(t, 3)
	k := c.kubectl
	k.MustRun(examples(t), "apply", "-f", "-")
	pods, want := c.waitHostnames(time.Minute)

	c.reachReference(pods, want, []string{"172.18.0.11", "172.18.0.12", "172.18.0.13"}, 12, "2", 30*time.Second, "")
	// In iptables mode, the node's rules are kube-proxy's: a KUBE-SVC
	// chain spreading over three KUBE-SEP chains with 1/3 and 1/2.
	rules, err := c.exec("node/node-1", "iptables-save", "-t", "nat")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rules, "--probability 0.33333") || !strings.Contains(rules, "--probability 0.50000") ||
		strings.Count(rules, "-j DNAT") < 3 || !strings.Contains(rules, "KUBE-SVC-") {
		t.Errorf("iptables-save on node-1 lacks the reference chains:\n%s", rules)
	}

	c.scaleAndDelete()
}

// scaleAndDelete checks the reference scenario's changes, seen from the
// outside client: scaling to 5 is seen in the answers, and a deleted pod
// stops answering within seconds.
func (c *localCluster) scaleAndDelete() {
	c.t.Helper()
	c.kubectl.MustRun("", "scale", "deployment", "hostnames", "--replicas=5")
	c.until("5 pods answering through the NodePort", time.Minute, func() bool {
		return len(c.names("client", 25, "curl", "-s", "--max-time", "2", "172.18.0.11:8477")) == 5
	})
	victim := podNames(c, "app=hostnames")[0]
	c.kubectl.MustRun("", "delete", "pod", victim, "--wait=false")
	c.until("the deleted pod to stop answering", 30*time.Second, func() bool {
		return c.names("client", 20, "curl", "-s", "--max-time", "2", "172.18.0.12:8477")[victim] == 0
	})
}

// TestServiceEnvironment: a pod started after a Service has its variables,
// one started before does not.
func TestServiceEnvironment(t *testing.T) {
	t.Parallel()
	c := up(t, 1)
	k := c.kubectl
	pod := func(name string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  containers: [{name: c, image: svcnet/echo}]
`, name)
	}
	k.MustRun(pod("before"), "apply", "-f", "-")
	c.until("pod before to run", time.Minute, func() bool { return len(podNames(c, "")) == 1 })
	k.MustRun("", "create", "service", "clusterip", "late", "--tcp=80:8080")
	k.MustRun(pod("after"), "apply", "-f", "-")
	c.until("pod after to run", time.Minute, func() bool { return len(podNames(c, "")) == 2 })
	after := k.MustRun("", "exec", "after", "--", "env")
	for _, v := range []string{"LATE_SERVICE_HOST=", "LATE_SERVICE_PORT=80", "LATE_PORT_80_TCP_PROTO=tcp", "KUBERNETES_SERVICE_HOST=10.96.0.1"} {
		if !strings.Contains(after, v) {
			t.Errorf("pod after the service lacks %s:\n%s", v, after)
		}
	}
	before := k.MustRun("", "exec", "before", "--", "env")
	if strings.Contains(before, "LATE_SERVICE_HOST") || !strings.Contains(before, "KUBERNETES_SERVICE_HOST") {
		t.Errorf("pod started before the service:\n%s", before)
	}
}

// TestLoadBalancer: a LoadBalancer Service gets an address from the pool,
// and the outside client reaches the pods through the edge and every
// node's NodePort.
func TestLoadBalancer(t *testing.T) {
	t.Parallel()
	c := upWithIngress(t, 2)
	k := c.kubectl
	k.MustRun(examples(t), "apply", "-f", "-")
	k.MustRun("", "expose", "deployment", "hostnames", "--name", "lb", "--type", "LoadBalancer", "--port", "80", "--target-port", "9376")
	var ip string
	c.until("a load-balancer address", 30*time.Second, func() bool {
		ip, _, _ = k.Run("", "get", "service", "lb", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
		return strings.HasPrefix(ip, "172.18.255.")
	})
	c.waitHostnames(time.Minute)
	c.until("all pods through the load balancer", 30*time.Second, func() bool {
		return len(c.names("client", 15, "curl", "-s", "--max-time", "2", ip+":80")) == 3
	})
	if out := k.MustRun("", "get", "service", "lb"); !strings.Contains(out, ip) {
		t.Errorf("EXTERNAL-IP not shown:\n%s", out)
	}

	// The ingress add-on behind its own load-balancer address, with the
	// example Ingress: by host and path to the pods, from outside.
	k.MustRun(example(t, "ingress.yaml"), "apply", "-f", "-")
	var edge string
	c.until("the ingress controller's load-balancer address", 30*time.Second, func() bool {
		edge, _, _ = k.Run("", "-n", "ingress-svcnet", "get", "service", "ingress-controller", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
		return strings.HasPrefix(edge, "172.18.255.") && edge != ip
	})
	c.until("all hostnames pods through the ingress", time.Minute, func() bool {
		return len(c.names("client", 15, "curl", "-s", "--max-time", "2", "-H", "Host: hostnames.example", edge+"/")) == 3
	})
	c.until("the echo path through the ingress", time.Minute, func() bool {
		out, err := c.exec("client", "curl", "-s", "--max-time", "2", "-H", "Host: hostnames.example", edge+"/echo?msg=through-the-ingress")
		return err == nil && out == "through-the-ingress"
	})
	if out, _ := c.exec("client", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "2", "-H", "Host: other.example", edge+"/"); out != "404" {
		t.Errorf("a host no Ingress names: %q, want 404", out)
	}
	c.until("the Ingress's status to show the address", 30*time.Second, func() bool {
		out, _, _ := k.Run("", "get", "ingress", "hostnames", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
		return out == edge
	})
	// Deleting the service releases the address: it stops answering.
	k.MustRun("", "delete", "service", "lb")
	c.until("the released address to stop answering", 30*time.Second, func() bool {
		_, err := c.exec("client", "curl", "-s", "--max-time", "1", ip+":80")
		return err != nil
	})
}

// TestUserspaceMode runs the reference scenario's traffic through the
// userspace proxy: NodePort from outside and the service name from a pod.
// The cluster uses iptables-legacy: every writer on a node (the proxy,
// the agent's egress rules) must use that backend and no other.
func TestUserspaceMode(t *testing.T) {
	t.Parallel()
	c := up(t, 2, "--proxy-mode", "userspace", "--iptables-binary", "iptables-legacy")
	k := c.kubectl
	k.MustRun(examples(t), "apply", "-f", "-")
	pods, _ := c.waitHostnames(time.Minute)
	c.until("NodePort through the userspace proxy to reach all pods", 30*time.Second, func() bool {
		return len(c.names("client", 9, "curl", "-s", "--max-time", "2", "172.18.0.12:8477")) == 3
	})
	c.until("the service name from a pod to reach all pods", 30*time.Second, func() bool {
		return len(c.names("default/"+pods[0], 9, "curl", "-s", "--max-time", "2", "hostnames")) == 3
	})
	rules, err := c.exec("node/node-1", "iptables-legacy-save", "-t", "nat")
	if err != nil || !strings.Contains(rules, "REDIRECT") || strings.Contains(rules, "KUBE-SEP-") || !strings.Contains(rules, "SVCNET-POD-EGRESS") {
		t.Errorf("userspace mode's and the agent's rules on node-1, legacy backend (%v):\n%s", err, rules)
	}
	if nft, err := c.exec("node/node-1", "iptables-nft-save"); err != nil || strings.Contains(nft, "KUBE-") || strings.Contains(nft, "SVCNET-") {
		t.Errorf("rules of ours in the nft backend of a legacy cluster's node (%v):\n%s", err, nft)
	}
}

// TestNFTablesMode runs the reference scenario's traffic through the
// nftables mode: NodePort from outside, the service name from a pod, and
// kube-proxy's table on the nodes with no iptables rules of the proxy's.
func TestNFTablesMode(t *testing.T) {
	t.Parallel()
	c := up(t, 2, "--proxy-mode", "nftables")
	k := c.kubectl
	k.MustRun(examples(t), "apply", "-f", "-")
	pods, _ := c.waitHostnames(time.Minute)
	for _, node := range []string{"172.18.0.11", "172.18.0.12"} {
		c.until("NodePort on "+node+" through the nftables mode to reach all pods", 30*time.Second, func() bool {
			return len(c.names("client", 12, "curl", "-s", "--max-time", "2", node+":8477")) == 3
		})
	}
	c.until("the service name from a pod to reach all pods", 30*time.Second, func() bool {
		return len(c.names("default/"+pods[0], 12, "curl", "-s", "--max-time", "2", "hostnames")) == 3
	})
	table, err := c.exec("node/node-1", "nft", "list", "table", "ip", "kube-proxy")
	if err != nil || !strings.Contains(table, "default/hostnames/tcp/") || !strings.Contains(table, "dnat ip to numgen random mod 3 map {") {
		t.Errorf("kube-proxy's table on node-1 (%v):\n%s", err, table)
	}
	if rules, err := c.exec("node/node-1", "iptables-save", "-t", "nat"); err != nil || strings.Contains(rules, "KUBE-SVC-") {
		t.Errorf("iptables-mode rules on an nftables node (%v):\n%s", err, rules)
	}
}
