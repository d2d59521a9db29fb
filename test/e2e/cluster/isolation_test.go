package cluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPodIsolation: pods are isolated as Kubernetes isolates them. Two
// pods with the same runAsUser neither see nor signal each other's
// processes; each container's command is process 1 of its own PID
// namespace, /proc shows only that namespace; the containers of a pod
// share its IPC namespace, shared memory and hostname; a pod with
// shareProcessNamespace sees its containers' processes under its
// pod-init; pods without a user get distinct ones; a container past its
// memory limit is OOMKilled.
func TestPodIsolation(t *testing.T) {
	t.Parallel()
	c := up(t, 1)
	k := c.kubectl
	k.MustRun(`apiVersion: v1
kind: Pod
metadata: {name: alice}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {runAsUser: 1000}
  containers:
  - {name: main, image: host, command: [sleep, "3601"]}
  - {name: side, image: host, command: [sleep, "3602"]}
---
apiVersion: v1
kind: Pod
metadata: {name: bob}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {runAsUser: 1000}
  containers: [{name: main, image: host, command: [sleep, "3603"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: shared}
spec:
  terminationGracePeriodSeconds: 1
  shareProcessNamespace: true
  containers:
  - {name: main, image: host, command: [sleep, "3604"]}
  - {name: side, image: host, command: [sh, -c, "exec sleep 3605"]}
`, "apply", "-f", "-")
	c.untilRunning("the isolation pods", "alice", "bob", "shared")
	exec := func(pod, container, script string) string {
		t.Helper()
		out, stderr, err := k.Run("", "exec", pod, "-c", container, "--", "sh", "-c", script)
		if err != nil {
			t.Fatalf("exec in %s/%s: %v: %s", pod, container, err, stderr)
		}
		return strings.TrimSpace(out)
	}

	// Bob's sleep, as the machine numbers it: alice's user is the same.
	var bobPid int
	c.until("bob's process", 30*time.Second, func() bool {
		pids := c.pidsWith("sleep", "3603", "!container-shim", "!pod-exec", "netns=svcnet-"+c.name+"-*")
		if len(pids) == 1 {
			bobPid = pids[0]
		}
		return len(pids) == 1
	})
	got := exec("alice", "main", fmt.Sprintf(`echo pid1 $(tr '\0' ' ' </proc/1/cmdline); echo procs /proc/[0-9]*
kill -0 %d 2>/dev/null && echo signal yes || echo signal no; id -u; hostname`, bobPid))
	// The exec's own shell is the only other process of the namespace.
	want := "pid1 sleep 3601\nprocs /proc/1 /proc/"
	if !strings.HasPrefix(got, want) || strings.Count(got, "/proc/") != 2 ||
		!strings.HasSuffix(got, "\nsignal no\n1000\nalice") {
		t.Errorf("alice, user 1000 as bob, sees:\n%s\nwant its own sleep as process 1, itself, no signal to bob's process %d, the pod's hostname", got, bobPid)
	}
	// The pod's containers share its IPC namespace, not bob's.
	ipc := func(pod, container string) string { return exec(pod, container, "stat -L -c %i /proc/self/ns/ipc") }
	if a, s, b := ipc("alice", "main"), ipc("alice", "side"), ipc("bob", "main"); a != s || a == b {
		t.Errorf("IPC namespaces: alice's containers %s and %s (want one), bob's %s (want another)", a, s, b)
	}
	// And its shared memory, /dev/shm, as a pod sandbox's.
	exec("alice", "main", "echo from-main >/dev/shm/svcnet-shm-test")
	if a, b := exec("alice", "side", "cat /dev/shm/svcnet-shm-test"), exec("bob", "main", "ls /dev/shm"); a != "from-main" || b != "" {
		t.Errorf("/dev/shm: alice's second container reads %q (want from-main), bob's lists %q (want nothing)", a, b)
	}
	if side := exec("alice", "side", "hostname; cat /etc/hostname; tr '\\0' ' ' </proc/1/cmdline"); side != "alice\nalice\nsleep 3602" {
		t.Errorf("alice's second container: %q, want the pod's hostname and its own sleep as process 1", side)
	}

	// A pod sharing its PID namespace: every container's processes, under
	// the pod's init.
	got = exec("shared", "side", `echo pid1 $(tr '\0' ' ' </proc/1/cmdline)
for p in /proc/[0-9]*; do tr '\0' ' ' <$p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 360[45] $'`)
	if !strings.Contains(got, "internal pod-init") || !strings.HasSuffix(got, "\n2") {
		t.Errorf("a pod sharing its PID namespace sees:\n%s\nwant its pod-init as process 1 and both containers' sleeps", got)
	}

	// A container past its memory limit: OOMKilled, as the kubelet says.
	k.MustRun(`apiVersion: v1
kind: Pod
metadata: {name: hog}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: host
    command: [dd, if=/dev/zero, of=/dev/null, bs=64M, count=1]
    resources: {limits: {memory: 16Mi}}
`, "apply", "-f", "-")
	c.until("hog to end", time.Minute, func() bool {
		out, _, _ := k.Run("", "get", "pod", "hog", "-o", "jsonpath={.status.phase}")
		return out == "Failed"
	})
	if out := k.MustRun("", "get", "pod", "hog", "-o", "jsonpath={.status.containerStatuses[0].state.terminated.reason} {.status.containerStatuses[0].state.terminated.exitCode}"); out != "OOMKilled 137" {
		t.Errorf("a container past its memory limit ended %q, want OOMKilled 137", out)
	}

	// Pods that name no user: a user each.
	k.MustRun(`apiVersion: v1
kind: Pod
metadata: {name: carol}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: main, image: host, command: [sleep, "3606"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: dave}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: main, image: host, command: [sleep, "3607"]}]
`, "apply", "-f", "-")
	c.untilRunning("pods without a user", "carol", "dave")
	if cu, du := exec("carol", "main", "id -u"), exec("dave", "main", "id -u"); cu == du || cu < "200000" || du < "200000" {
		t.Errorf("default users: carol %s, dave %s; want two distinct ones from 200000", cu, du)
	}
	if out := k.MustRun("", "delete", "pod", "carol", "dave", "alice", "bob", "shared", "hog", "--wait"); !strings.Contains(out, "deleted") {
		t.Errorf("delete: %s", out)
	}
	if left := c.pidsWith("internal", "pod-init", "!container-shim", "netns=svcnet-"+c.name+"-*"); len(left) > 0 {
		t.Errorf("pod-init processes left after their pods: %v", left)
	}
}
