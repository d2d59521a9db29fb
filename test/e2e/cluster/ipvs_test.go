package cluster_test

import (
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/test/e2e/framework"
	"github.com/svcnet/svcnet/test/vm"
)

// TestReferenceScenarioIPVS is the reference scenario with `svcnet up
// --proxy-mode ipvs`, inside the test VM (this kernel has no IPVS): the
// three names of the Service and its cluster IP from a pod, every node's
// NodePort from the outside client, and ipvsadm showing the virtual
// servers on a node.
func TestReferenceScenarioIPVS(t *testing.T) {
	framework.RequireRoot(t)
	if !vm.Inside(t, vm.Config{
		Timeout: 20 * time.Minute, MemoryMiB: 4096,
		Env:     []string{framework.BinaryEnv + "=" + framework.Binary(t)},
		Modules: []string{"br_netfilter", "ip_vs"},
	}) {
		return
	}
	c := upCluster(t, 2, "--proxy-mode", "ipvs", "--no-ingress", "--wait", "10m")
	k := c.kubectl
	k.MustRun(examples(t), "apply", "-f", "-")
	pods, want := c.waitHostnames(5 * time.Minute)
	c.reachReference(pods, want, []string{"172.18.0.11", "172.18.0.12"}, 9, "5", 2*time.Minute, "")
	clusterIP := k.MustRun("", "get", "service", "hostnames", "-o", "jsonpath={.spec.clusterIP}")
	out, err := c.exec("node/node-1", "ipvsadm", "-Ln")
	t.Logf("ipvsadm -Ln on node-1:\n%s", out)
	if err != nil || !strings.Contains(out, "TCP  "+clusterIP+":80 rr") || strings.Count(out, "Masq") < 3*3 {
		t.Errorf("ipvsadm -Ln on node-1 lacks the cluster IP's virtual server with its three real servers (and the node ports'): %v", err)
	}
	links, err := c.exec("node/node-1", "ip", "-brief", "addr", "show", "kube-ipvs0")
	if err != nil || !strings.Contains(links, clusterIP+"/32") {
		t.Errorf("kube-ipvs0 on node-1 lacks %s: %s %v", clusterIP, links, err)
	}
}
