package cluster_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/internal/netns"
)

// TestClusterDNS: from a pod, through its resolv.conf, the cluster DNS
// answers the reference Service under its three names, a Service created
// a moment ago, and an outside name, which it forwards to a fake upstream
// running in the cluster's outside-client namespace (the cluster has no
// other way out). A headless Service returns its ready pods only. Pods
// ask their node's node-local cache, which asks the cluster DNS; a pod
// that names the cluster DNS's ClusterIP itself (dnsPolicy None, as
// without the cache) gets the same answers.
func TestClusterDNS(t *testing.T) {
	t.Parallel()
	c := up(t, 2, "--dns-upstream", "172.18.0.2:53")
	client := "svcnet-" + c.name + "-client"
	pc, err := netns.ListenPacket(client, "udp", "172.18.0.2:53")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := netns.Listen(client, "tcp", "172.18.0.2:53")
	if err != nil {
		t.Fatal(err)
	}
	upstream := dnstest.StartUpstreamOn(t, pc, ln)
	upstream.Add(t, "external.example.com. 30 IN A 192.0.2.44")

	k := c.kubectl
	k.MustRun(examples(t), "apply", "-f", "-")
	k.MustRun(`apiVersion: v1
kind: Pod
metadata: {name: asker}
spec:
  containers: [{name: c, image: host, command: [sleep, "3600"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: direct}
spec:
  dnsPolicy: None
  dnsConfig:
    nameservers: [10.96.0.10]
    searches: [default.svc.cluster.local, svc.cluster.local, cluster.local]
    options: [{name: ndots, value: "5"}]
  containers: [{name: c, image: host, command: [sleep, "3600"]}]
`, "apply", "-f", "-")
	c.until("asker and direct running", time.Minute, func() bool {
		running := podNames(c, "")
		return slices.Contains(running, "asker") && slices.Contains(running, "direct")
	})
	if conf, err := c.exec("default/asker", "cat", "/etc/resolv.conf"); err != nil || !strings.Contains(conf, "nameserver 169.254.20.10\n") {
		t.Fatalf("pod's resolv.conf does not name the node-local cache (%v):\n%s", err, conf)
	}
	resolve := func(name string) string {
		out, err := c.exec("default/asker", "getent", "hosts", name)
		if err != nil {
			return ""
		}
		return strings.Fields(out + " ")[0]
	}
	clusterIP := k.MustRun("", "get", "service", "hostnames", "-o", "jsonpath={.spec.clusterIP}")
	for _, name := range []string{"hostnames", "hostnames.default", "hostnames.default.svc.cluster.local"} {
		c.until(name+" to resolve to the cluster IP", 30*time.Second, func() bool { return resolve(name) == clusterIP })
		c.until(name+" to resolve to the cluster IP through the ClusterIP of kube-dns", 30*time.Second, func() bool {
			out, err := c.exec("default/direct", "getent", "hosts", name)
			return err == nil && strings.Fields(out + " ")[0] == clusterIP
		})
	}
	c.until("an outside name through the upstream", 30*time.Second, func() bool { return resolve("external.example.com") == "192.0.2.44" })
	if upstream.QueriesFor("external.example.com.") == 0 {
		t.Error("the upstream was never asked")
	}

	// A new Service resolves within a second of its creation.
	k.MustRun("", "create", "service", "clusterip", "fresh", "--tcp=80")
	created := time.Now()
	fresh := k.MustRun("", "get", "service", "fresh", "-o", "jsonpath={.spec.clusterIP}")
	c.until("the new service to resolve", 10*time.Second, func() bool { return resolve("fresh") == fresh })
	if d := time.Since(created); d > 3*time.Second {
		// Each check goes through svcnet exec and the API server; the
		// DNS itself answers much faster (see test/e2e/dns).
		t.Errorf("a new service took %s to resolve", d)
	}

	// Headless: the ready pods' addresses.
	k.MustRun(`apiVersion: v1
kind: Service
metadata: {name: headless}
spec:
  clusterIP: None
  selector: {app: hostnames}
  ports: [{port: 9376}]
`, "apply", "-f", "-")
	c.waitHostnames(time.Minute)
	podIPs := strings.Fields(k.MustRun("", "get", "pods", "-l", "app=hostnames", "-o", `jsonpath={range .items[*]}{.status.podIP} {end}`))
	c.until("the headless name to list the 3 pods", 30*time.Second, func() bool {
		out, err := c.exec("default/asker", "getent", "ahostsv4", "headless")
		if err != nil {
			return false
		}
		for _, ip := range podIPs {
			if !strings.Contains(out, ip) {
				return false
			}
		}
		return true
	})
}
