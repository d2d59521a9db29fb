package cluster_test

import (
	"bufio"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

// TestNodeAgent: probes, restarts and their reasons, graceful termination,
// eviction past an ephemeral-storage limit,
// logs and exec, on a one-node cluster.
func TestNodeAgent(t *testing.T) {
	t.Parallel()
	c := up(t, 1)
	k := c.kubectl
	k.MustRun(`apiVersion: v1
kind: Pod
metadata: {name: ready-toggle, labels: {app: toggle}}
spec:
  containers:
  - name: echo
    image: svcnet/echo
    readinessProbe:
      httpGet: {path: /readyz, port: 8080}
      periodSeconds: 1
      failureThreshold: 1
---
apiVersion: v1
kind: Pod
metadata: {name: no-such-image}
spec:
  containers: [{name: c, image: example.com/nope:1.0}]
---
apiVersion: v1
kind: Pod
metadata: {name: crasher}
spec:
  containers: [{name: c, image: host, command: [sh, -c, "echo crashing; exit 3"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: stubborn}
spec:
  terminationGracePeriodSeconds: 2
  containers: [{name: c, image: host, command: [sh, -c, "trap '' TERM; echo started; while true; do sleep 1; done"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: ticker}
spec:
  containers: [{name: c, image: host, command: [sh, -c, "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.3; done"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: hog}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: host
    command: [sh, -c, "sleep 1; dd if=/dev/urandom of=hog bs=1M count=10; sleep 3600"]
    resources: {limits: {ephemeral-storage: 5Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: draining}
spec:
  terminationGracePeriodSeconds: 60
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/agnhost:2.66.1
    args: [netexec, --http-port=8080, --delay-shutdown=60]
    readinessProbe:
      httpGet: {path: /readyz, port: 8080}
      periodSeconds: 1
      failureThreshold: 1
---
apiVersion: v1
kind: Pod
metadata: {name: exec-probe}
spec:
  containers:
  - name: c
    image: host
    command: [sh, -c, "sleep 3600"]
    livenessProbe:
      exec: {command: [sh, -c, "test -n \"$HOSTNAME\""]}
      periodSeconds: 1
`, "apply", "-f", "-")
	phase := func(pod string) string {
		out, _, _ := k.Run("", "get", "pod", pod, "-o", "jsonpath={.status.phase}")
		return out
	}
	jsonpath := func(pod, path string) string {
		out, _, _ := k.Run("", "get", "pod", pod, "-o", "jsonpath="+path)
		return out
	}
	// Readiness follows the probe, and an unready pod gets no traffic.
	k.MustRun("", "create", "service", "clusterip", "toggle", "--tcp=80:8080")
	k.MustRun("", "patch", "service", "toggle", "-p", `{"spec":{"selector":{"app":"toggle"}}}`)
	c.until("ready-toggle ready", time.Minute, func() bool { return jsonpath("ready-toggle", "{.status.containerStatuses[0].ready}") == "true" })
	c.until("stubborn running", time.Minute, func() bool { return phase("stubborn") == "Running" })
	viaService := func() (string, error) {
		return c.exec("default/stubborn", "curl", "-s", "--max-time", "1", "toggle/hostname")
	}
	c.until("the service to reach ready-toggle", 30*time.Second, func() bool { out, err := viaService(); return err == nil && out == "ready-toggle" })
	k.MustRun("", "exec", "ready-toggle", "--", "curl", "-s", "localhost:8080/set-ready?ready=false")
	c.until("ready-toggle unready", 20*time.Second, func() bool {
		return jsonpath("ready-toggle", `{.status.conditions[?(@.type=="Ready")].status}`) == "False"
	})
	c.until("the unready pod to get no traffic", 20*time.Second, func() bool { _, err := viaService(); return err != nil })
	k.MustRun("", "exec", "ready-toggle", "--", "curl", "-s", "localhost:8080/set-ready?ready=true")
	c.until("ready-toggle ready again", 20*time.Second, func() bool {
		return jsonpath("ready-toggle", `{.status.conditions[?(@.type=="Ready")].status}`) == "True"
	})
	// An unknown image cannot be pulled, and says so.
	c.until("ErrImagePull", 30*time.Second, func() bool {
		return jsonpath("no-such-image", "{.status.containerStatuses[0].state.waiting.reason}") == "ErrImagePull"
	})
	if msg := jsonpath("no-such-image", "{.status.containerStatuses[0].state.waiting.message}"); !strings.Contains(msg, "not built into svcnet") {
		t.Errorf("ErrImagePull message: %q", msg)
	}
	// A crashing container backs off and counts its restarts.
	c.until("CrashLoopBackOff", time.Minute, func() bool {
		return jsonpath("crasher", "{.status.containerStatuses[0].state.waiting.reason}") == "CrashLoopBackOff"
	})
	if code := jsonpath("crasher", "{.status.containerStatuses[0].lastState.terminated.exitCode}"); code != "3" {
		t.Errorf("crasher's last exit code %q, want 3", code)
	}
	c.until("a restart", time.Minute, func() bool { return jsonpath("crasher", "{.status.containerStatuses[0].restartCount}") >= "1" })
	if out := k.MustRun("", "logs", "crasher", "--previous"); !strings.Contains(out, "crashing") {
		t.Errorf("logs --previous: %q", out)
	}
	// Between two crashes the container runs for a moment: the crash
	// loop shows most of the time, not every instant.
	c.until("kubectl get pods to show the crash loop", 30*time.Second, func() bool {
		out, _, _ := k.Run("", "get", "pods", "crasher")
		return strings.Contains(out, "CrashLoopBackOff") || strings.Contains(out, "Error")
	})
	// Logs and exec, like on any cluster.
	c.until("stubborn running", time.Minute, func() bool { return phase("stubborn") == "Running" })
	if out := k.MustRun("", "logs", "stubborn"); !strings.Contains(out, "started") {
		t.Errorf("logs: %q", out)
	}
	if out := k.MustRun("", "exec", "stubborn", "--", "hostname"); strings.TrimSpace(out) != "stubborn" {
		t.Errorf("exec hostname: %q", out)
	}
	if _, stderr, err := k.Run("", "exec", "stubborn", "--", "sh", "-c", "exit 7"); err == nil || !strings.Contains(stderr, "exit code 7") {
		t.Errorf("exec exit code: %v %q", err, stderr)
	}
	// kubectl logs -f streams as the container writes.
	c.until("ticker running", time.Minute, func() bool { return phase("ticker") == "Running" })
	// Five lines beyond the last one written when it started: lines
	// that only following can deliver (bounded at 30s, not timed).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	before := strings.Count(k.MustRun("", "logs", "ticker"), "tick")
	follow := exec.CommandContext(ctx, k.Path, "--kubeconfig", k.Kubeconfig, "logs", "-f", "ticker")
	stdout, _ := follow.StdoutPipe()
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	sc, lines := bufio.NewScanner(stdout), 0
	for sc.Scan() && lines < before+5 {
		lines++
	}
	cancel()
	_ = follow.Wait()
	if lines < before+5 {
		t.Errorf("logs -f delivered %d lines, want the %d there were and 5 more as they were written", lines, before)
	}
	// kubectl exec -it gets a terminal in the pod (script gives kubectl one).
	for _, version := range []string{"1.27", "1.33"} {
		kv := framework.NewKubectl(t, version, k.Kubeconfig)
		out, err := exec.Command("script", "-qec", kv.Path+" --kubeconfig "+k.Kubeconfig+" exec -it stubborn -- tty", "/dev/null").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "/dev/pts/") {
			t.Errorf("kubectl %s exec -it: %v %q", version, err, out)
		}
	}
	// The exec liveness probe keeps passing: no restart.
	time.Sleep(3 * time.Second)
	if r := jsonpath("exec-probe", "{.status.containerStatuses[0].restartCount}"); r != "0" {
		t.Errorf("exec-probe restarted %s times", r)
	}
	// Graceful termination: Terminating for the grace period, then gone.
	start := time.Now()
	k.MustRun("", "delete", "pod", "stubborn", "--wait=false")
	if out := k.MustRun("", "get", "pod", "stubborn"); !strings.Contains(out, "Terminating") {
		t.Errorf("a deleted pod is not Terminating:\n%s", out)
	}
	c.until("stubborn gone", 30*time.Second, func() bool {
		_, _, err := k.Run("", "get", "pod", "stubborn")
		return err != nil
	})
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("a pod ignoring SIGTERM was gone after %s, before its 2 s grace period", d)
	}
	// A pod writing past its ephemeral-storage limit is evicted, as
	// kubelet's eviction manager does. It writes in its working directory,
	// /, which its user owns in its own root, as an image's root would.
	c.until("hog evicted", time.Minute, func() bool { return phase("hog") == "Failed" })
	if got := jsonpath("hog", "{.status.reason}: {.status.message}"); got != "Evicted: Pod ephemeral local storage usage exceeds the total limit of containers 5Mi. " {
		t.Errorf("hog's status: %q", got)
	}
	// Probes go on while a pod terminates, as kubelet's do: a server that
	// fails its readiness at SIGTERM (and serves on for a minute) is seen
	// unready while it drains, long before its grace period ends.
	c.until("draining ready", time.Minute, func() bool {
		return jsonpath("draining", `{.status.conditions[?(@.type=="Ready")].status}`) == "True"
	})
	k.MustRun("", "delete", "pod", "draining", "--wait=false")
	c.until("the terminating pod unready", 30*time.Second, func() bool {
		deleting, ready, _ := strings.Cut(jsonpath("draining", `{.metadata.deletionTimestamp}/{.status.conditions[?(@.type=="Ready")].status}`), "/")
		return deleting != "" && ready == "False"
	})
	k.MustRun("", "delete", "pod", "draining", "--grace-period=0", "--force")
}
