// Package cluster_test brings up a real local cluster with `svcnet up`
// (nodes and pods in network namespaces) and checks the reference
// scenario and the node agent's behaviour from the outside, with kubectl.
package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/test/e2e/framework"
	"github.com/svcnet/svcnet/test/vm"
)

// localCluster is a cluster made by `svcnet up` for one test.
type localCluster struct {
	t       testing.TB
	name    string
	home    string
	lastErr error // the last failed command of names, or mismatch, for timeouts
	bin     string
	kubectl *framework.Kubectl
	gone    bool // down has run
}

// up creates a cluster without the ingress add-on: most tests do not use
// it, and on two cores its pods' CPU is taken from the clusters of the
// tests running beside them. upWithIngress keeps it.
func up(t testing.TB, nodes int, extra ...string) *localCluster {
	t.Helper()
	return upCluster(t, nodes, append([]string{"--no-ingress"}, extra...)...)
}

func upWithIngress(t testing.TB, nodes int, extra ...string) *localCluster {
	t.Helper()
	return upCluster(t, nodes, extra...)
}

func upCluster(t testing.TB, nodes int, extra ...string) *localCluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("svcnet up needs root (network namespaces); CI runs as root")
	}
	c := &localCluster{t: t, name: fmt.Sprintf("e2e%d", rand.IntN(1e6)), home: t.TempDir(), bin: framework.Binary(t)}
	t.Cleanup(c.down)
	// No --api-port: up takes 6443 or, when another cluster of a parallel
	// test has it, any free port, and holds it (no pick-then-bind race).
	args := append([]string{"up", "--name", c.name, "--nodes", fmt.Sprint(nodes), "--service-node-port-range", "8000-32767"}, extra...)
	out, err := c.svcnet(args...)
	if err != nil {
		c.dumpLogs()
		t.Fatalf("svcnet up: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	c.kubectl = framework.NewKubectl(t, "1.33", filepath.Join(c.home, c.name, "kubeconfig"))
	return c
}

func (c *localCluster) svcnet(args ...string) (string, error) {
	limit := 3 * time.Minute
	if vm.InVM() {
		limit = 15 * time.Minute // everything runs about 7× slower there
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = append(os.Environ(), "SVCNET_HOME="+c.home)
	// Out of time, svcnet is asked for its goroutines' stacks (SIGQUIT:
	// Go prints them and exits) before it is killed, so that the output
	// says where it hung.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// exec runs a command on the client, a node or in a pod.
func (c *localCluster) exec(target string, argv ...string) (string, error) {
	return c.svcnet(append([]string{"exec", "--name", c.name, target, "--"}, argv...)...)
}

func (c *localCluster) dumpLogs() {
	// The cluster's own logs, then each node's (its proxy and DNS
	// cache) and its pods' containers'.
	root := filepath.Join(c.home, c.name)
	logs, _ := filepath.Glob(filepath.Join(root, "logs", "*.log"))
	nodeLogs, _ := filepath.Glob(filepath.Join(root, "nodes", "*", "*.log"))
	podLogs, _ := filepath.Glob(filepath.Join(root, "nodes", "*", "pods", "*", "*.log"))
	for _, l := range slices.Concat(logs, nodeLogs, podLogs) {
		data, _ := os.ReadFile(l)
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		rel, _ := filepath.Rel(root, l)
		c.t.Logf("== %s\n%s", rel, data)
	}
}

func (c *localCluster) down() {
	if c.gone {
		return
	}
	c.gone = true
	// The supervisor stops everything first, so that races on the way
	// down are in the logs before down removes them.
	c.stopSupervisor()
	c.checkRaces()
	if c.t.Failed() {
		c.dumpLogs()
	}
	if out, err := c.svcnet("down", "--name", c.name); err != nil {
		c.t.Errorf("svcnet down: %v\n%s", err, out)
	}
	// Nothing of the cluster may be left: namespaces, processes.
	if left, _ := netns.List("svcnet-" + c.name + "-"); len(left) > 0 {
		c.t.Errorf("namespaces left after svcnet down: %v", left)
	}
	if procs, _ := exec.Command("pgrep", "-af", c.home).CombinedOutput(); len(bytes.TrimSpace(procs)) > 0 {
		c.t.Errorf("processes left after svcnet down: %q", procs)
	}
}

// stopSupervisor asks the cluster's supervisor to stop (as down does)
// and waits until it has.
func (c *localCluster) stopSupervisor() {
	data, err := os.ReadFile(filepath.Join(c.home, c.name, "supervisor.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || syscall.Kill(pid, syscall.SIGTERM) != nil {
		return
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil; {
		time.Sleep(100 * time.Millisecond)
	}
}

// checkRaces fails the test if any process of the cluster (supervisor,
// components, proxies, pods) reported a data race in its log: with
// SVCNET_E2E_RACE=1 the binary is built with the race detector.
func (c *localCluster) checkRaces() {
	_ = filepath.WalkDir(filepath.Join(c.home, c.name), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") {
			return nil
		}
		data, _ := os.ReadFile(path)
		if i := bytes.Index(data, []byte("WARNING: DATA RACE")); i >= 0 {
			c.t.Errorf("data race in %s:\n%s", path, data[i:min(len(data), i+6000)])
		}
		return nil
	})
}

// in returns a view of the cluster whose failures fail t: subtests use
// it, since FailNow must run on the goroutine of the test that fails.
func (c *localCluster) in(t testing.TB) *localCluster {
	v := *c
	v.t = t
	v.kubectl = c.kubectl.For(t)
	return &v
}

func (c *localCluster) until(what string, timeout time.Duration, cond func() bool) {
	c.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		c.t.Fatalf("timed out after %s waiting for %s (last failure: %v)", timeout, what, c.lastErr)
	}
}

// untilRunning waits up to a minute, for what, until kubectl shows each
// of the named pods of the default namespace Running.
func (c *localCluster) untilRunning(what string, pods ...string) {
	c.t.Helper()
	c.until(what+" running", time.Minute, func() bool {
		for _, pod := range pods {
			if out, _, _ := c.kubectl.Run("", "get", "pod", pod, "-o", "jsonpath={.status.phase}"); out != "Running" {
				return false
			}
		}
		return true
	})
}

// names collects the distinct answers of n requests.
func (c *localCluster) names(target string, n int, argv ...string) map[string]int {
	seen := map[string]int{}
	for range n {
		out, err := c.exec(target, argv...)
		if err != nil {
			c.lastErr = fmt.Errorf("%s %v: %w: %s", target, argv, err, out)
		}
		if err == nil {
			seen[strings.TrimSpace(out)]++
		}
	}
	return seen
}

func podNames(c *localCluster, selector string) []string {
	out := c.kubectl.MustRun("", "get", "pods", "-l", selector, "-o", `jsonpath={range .items[?(@.status.phase=="Running")]}{.metadata.name}{"\n"}{end}`)
	return strings.Fields(out)
}
