package cluster_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/cliflags"
	nodeagent "github.com/svcnet/svcnet/internal/node"
)

// TestFrozenNodeAgent stops node-2's agent (SIGSTOP: alive but silent, as
// when it is cut off from the API server). The node lifecycle controller
// marks node-2 NotReady and its pods unready, so the NodePort on node-1
// answers from node-1's pods only; when the agent runs again, it puts
// its pods' readiness back and they answer again.
func TestFrozenNodeAgent(t *testing.T) {
	t.Parallel()
	// The agent renews its Lease every 10 s: the grace period must be
	// well longer than that, on a loaded machine too.
	c := up(t, 2, "--controller-manager-arg=--node-monitor-grace-period=30s", "--controller-manager-arg=--node-monitor-period=500ms")
	k := c.kubectl
	k.MustRun(examples(t), "apply", "-f", "-")
	k.MustRun("", "scale", "deployment", "hostnames", "--replicas=4")
	c.until("4 ready hostnames pods", time.Minute, func() bool {
		out, _, _ := k.Run("", "get", "deployment", "hostnames", "-o", "jsonpath={.status.readyReplicas}")
		return out == "4"
	})
	onNode := func(node string) []string {
		out := k.MustRun("", "get", "pods", "-l", "app=hostnames", "--field-selector", "spec.nodeName="+node,
			"-o", `jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}`)
		names := strings.Fields(out)
		slices.Sort(names)
		return names
	}
	node1, node2 := onNode("node-1"), onNode("node-2")
	if len(node1) == 0 || len(node2) == 0 {
		t.Fatalf("pods not on both nodes: %v %v", node1, node2)
	}
	answers := func() []string {
		var got []string
		for n := range c.names("client", 16, "curl", "-s", "--max-time", "2", "172.18.0.11:8477") {
			got = append(got, n)
		}
		slices.Sort(got)
		return got
	}
	all := slices.Sorted(slices.Values(append(slices.Clone(node1), node2...)))
	c.until("node-1's NodePort to reach all 4 pods", 30*time.Second, func() bool { return slices.Equal(answers(), all) })

	pid := agentPid(t, c, "node-2")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	})
	c.until("node-2 NotReady", time.Minute, func() bool {
		out, _, _ := k.Run("", "get", "node", "node-2", "--no-headers")
		return strings.Contains(out, "NotReady")
	})
	// The taints follow the condition in a write of their own.
	c.until("node-2 tainted unreachable", 10*time.Second, func() bool {
		taints, _, _ := k.Run("", "get", "node", "node-2", "-o", `jsonpath={range .spec.taints[*]}{.key}:{.effect} {end}`)
		return strings.Contains(taints, "node.kubernetes.io/unreachable:NoSchedule") && strings.Contains(taints, "node.kubernetes.io/unreachable:NoExecute")
	})
	c.until("node-1's NodePort to answer from node-1's pods only", 30*time.Second, func() bool { return slices.Equal(answers(), node1) })
	if out, _, _ := k.Run("", "get", "node", "node-1", "--no-headers"); strings.Contains(out, "NotReady") {
		t.Errorf("node-1: %s", out)
	}

	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	c.until("node-2 Ready again", time.Minute, func() bool {
		out, _, _ := k.Run("", "get", "node", "node-2", "--no-headers")
		return strings.Contains(out, " Ready") && !strings.Contains(out, "NotReady")
	})
	c.until("node-2's taints gone", 10*time.Second, func() bool {
		taints, _, err := k.Run("", "get", "node", "node-2", "-o", "jsonpath={.spec.taints}")
		return err == nil && taints == ""
	})
	c.until("all 4 pods answering again", time.Minute, func() bool { return slices.Equal(answers(), all) })
}

// agentPid finds the node agent of node among the cluster's processes.
func agentPid(t *testing.T, c *localCluster, node string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.home, c.name, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", f, "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(string(bytes.TrimRight(cmdline, "\x00")), "\x00")
		if len(argv) < 2 || argv[1] != "node" {
			continue
		}
		// The agent's flags as the agent parses them.
		o := nodeagent.Defaults()
		if cliflags.Parse(&o, (*nodeagent.Options).AddFlags, argv[2:]) == nil && o.HostnameOverride == node {
			return pid
		}
	}
	t.Fatalf("no node agent of %s among the cluster's processes", node)
	return 0
}
