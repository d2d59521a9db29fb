package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

// TestKubectlVerbs: kubectl's daily verbs beyond get/apply/exec/logs,
// with the oldest and newest kubectl the machines carry (1.27 speaks
// SPDY, 1.33 WebSocket).
func TestKubectlVerbs(t *testing.T) {
	t.Parallel()
	c := up(t, 1)
	c.kubectl.MustRun(examples(t), "apply", "-f", "-")
	pods, _ := c.waitHostnames(time.Minute)
	t.Run("pods/proxy and services/proxy", func(t *testing.T) {
		c := c.in(t)
		for _, tc := range []struct{ path, want string }{
			{"/api/v1/namespaces/default/pods/" + pods[0] + ":9376/proxy/", pods[0]},
			{"/api/v1/namespaces/default/pods/http:" + pods[1] + ":9376/proxy/any/path?x=1", pods[1]},
			// The pod's first declared container port.
			{"/api/v1/namespaces/default/pods/" + pods[2] + "/proxy/", pods[2]},
			// No path: redirected to …/proxy/, as kube-apiserver does.
			{"/api/v1/namespaces/default/pods/" + pods[2] + "/proxy", pods[2]},
			{"/api/v1/namespaces/default/services/hostnames:80/proxy/", "hostnames-"},
			{"/api/v1/namespaces/default/services/http:hostnames:80/proxy/", "hostnames-"},
		} {
			out, errOut, err := c.kubectl.Run("", "get", "--raw", tc.path)
			if err != nil || !strings.HasPrefix(strings.TrimSpace(out), tc.want) {
				t.Errorf("GET %s = %q (%v %s), want %s…", tc.path, out, err, errOut, tc.want)
			}
		}
		if _, errOut, err := c.kubectl.Run("", "get", "--raw", "/api/v1/namespaces/default/services/hostnames:81/proxy/"); err == nil || !strings.Contains(errOut, "no service port") {
			t.Errorf("a port the Service lacks: %v %s", err, errOut)
		}
	})
	t.Run("hostNetwork pod", func(t *testing.T) {
		c := c.in(t)
		c.kubectl.MustRun(`
apiVersion: v1
kind: Pod
metadata: {name: on-the-node}
spec:
  hostNetwork: true
  containers: [{name: c, image: svcnet/hostnames, args: [--port, "80"], ports: [{containerPort: 80}]}]
`, "apply", "-f", "-")
		c.untilRunning("the hostNetwork pod", "on-the-node")
		podIP := c.kubectl.MustRun("", "get", "pod", "on-the-node", "-o", "jsonpath={.status.podIP}")
		nodeIP := c.kubectl.MustRun("", "get", "node", "node-1", "-o", `jsonpath={.status.addresses[?(@.type=="InternalIP")].address}`)
		if podIP != nodeIP {
			t.Errorf("hostNetwork pod IP %s, want the node's %s", podIP, nodeIP)
		}
		// From outside the cluster, on the node's address (a low port:
		// NET_BIND_SERVICE, as root has in Kubernetes); its hostname is
		// the node's. The API server's pods/proxy reaches it too.
		if out, err := c.exec("client", "curl", "-s", "--max-time", "5", nodeIP+":80"); err != nil || strings.TrimSpace(out) != "node-1" {
			t.Errorf("the hostNetwork pod on %s:80 answered %q (%v)", nodeIP, out, err)
		}
		if out, errOut, err := c.kubectl.Run("", "get", "--raw", "/api/v1/namespaces/default/pods/on-the-node:80/proxy/"); err != nil || strings.TrimSpace(out) != "node-1" {
			t.Errorf("pods/proxy to the hostNetwork pod: %q (%v %s)", out, err, errOut)
		}
	})
	t.Run("pause and busybox images", func(t *testing.T) {
		c := c.in(t)
		c.kubectl.MustRun("", "run", "pause", "--image=registry.k8s.io/pause:3.10.2")
		c.kubectl.MustRun("", "run", "bb", "--image=registry.k8s.io/e2e-test-images/busybox:1.37.0-1", "--restart=Never",
			"--", "/bin/sh", "-c", "echo $((6*7)); wget -q -O- http://hostnames")
		c.until("the busybox pod done and pause running", time.Minute, func() bool {
			out, _, _ := c.kubectl.Run("", "get", "pods", "bb", "pause", "-o", "jsonpath={.items[*].status.phase}")
			return out == "Succeeded Running"
		})
		logs := c.kubectl.MustRun("", "logs", "bb")
		if lines := strings.Fields(logs); len(lines) != 2 || lines[0] != "42" || !strings.HasPrefix(lines[1], "hostnames-") {
			t.Errorf("busybox: %q", logs)
		}
		c.kubectl.MustRun("", "run", "bbsleep", "--image=busybox", "--", "sleep", "3600")
		c.untilRunning("the sleeping busybox pod", "bbsleep")
		// exec runs busybox applets too (busybox's nslookup exits 1 when
		// one of its A and AAAA queries finds nothing, as here: no IPv6).
		svcIP := c.kubectl.MustRun("", "get", "service", "hostnames", "-o", "jsonpath={.spec.clusterIP}")
		if out, errOut, _ := c.kubectl.Run("", "exec", "bbsleep", "--", "nslookup", "hostnames"); !strings.Contains(out, "Address: "+svcIP) {
			t.Errorf("nslookup in busybox: %q %s", out, errOut)
		}
		start := time.Now()
		c.kubectl.MustRun("", "delete", "pod", "pause", "--wait")
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("the pause pod took %v to stop (it exits at SIGTERM)", d)
		}
	})
	t.Run("hostPort", func(t *testing.T) {
		c := c.in(t)
		c.kubectl.MustRun(`
apiVersion: v1
kind: Pod
metadata: {name: hostport}
spec:
  containers: [{name: c, image: svcnet/hostnames, ports: [{containerPort: 9376, hostPort: 18080}]}]
`, "apply", "-f", "-")
		c.untilRunning("the hostPort pod", "hostport")
		// From outside, on the node's address; from the node itself, on
		// its loopback (as a hostNetwork pod reaches it).
		// Running is not listening yet (the pod has no readiness probe):
		// the first answer may take a moment.
		for _, tc := range []struct{ target, addr string }{{"client", "172.18.0.11:18080"}, {"node/node-1", "127.0.0.1:18080"}} {
			var out string
			var err error
			deadline := time.Now().Add(30 * time.Second)
			for {
				out, err = c.exec(tc.target, "curl", "-s", "--max-time", "5", tc.addr)
				if (err == nil && strings.TrimSpace(out) == "hostport") || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err != nil || strings.TrimSpace(out) != "hostport" {
				t.Errorf("from %s, %s answered %q (%v), want the pod's name", tc.target, tc.addr, out, err)
			}
		}
		// Gone with the pod.
		c.kubectl.MustRun("", "delete", "pod", "hostport", "--wait")
		if out, err := c.exec("client", "curl", "-s", "--max-time", "2", "172.18.0.11:18080"); err == nil {
			t.Errorf("the hostPort still answers after its pod is gone: %q", out)
		}
	})
	t.Run("agnhost image", func(t *testing.T) {
		c := c.in(t)
		// As Kubernetes' e2e suite runs it: args to the image's
		// entrypoint, /agnhost by path, a volume where the machine has
		// no such directory.
		c.kubectl.MustRun(`
apiVersion: v1
kind: Pod
metadata: {name: netexec}
spec:
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/agnhost:2.66.1
    args: [netexec, --http-port=8080, --udp-port=8081]
    volumeMounts: [{name: results, mountPath: /results}]
  - name: hostname
    image: registry.k8s.io/e2e-test-images/agnhost:2.66.1
    command: [/agnhost, serve-hostname, --port, "9377"]
  volumes: [{name: results, emptyDir: {}}]
`, "apply", "-f", "-")
		c.until("the agnhost pod ready", time.Minute, func() bool {
			out, _, _ := c.kubectl.Run("", "get", "pod", "netexec", "-o", "jsonpath={.status.phase} {.status.conditions[?(@.type==\"Ready\")].status}")
			return out == "Running True"
		})
		// Neither container has a readiness probe: each is ready once
		// started, maybe before it listens.
		c.until("netexec /hostname through pods/proxy", 30*time.Second, func() bool {
			out, _, _ := c.kubectl.Run("", "get", "--raw", "/api/v1/namespaces/default/pods/netexec:8080/proxy/hostname")
			return out == "netexec"
		})
		c.until("/agnhost serve-hostname to answer", 30*time.Second, func() bool {
			out, _, _ := c.kubectl.Run("", "get", "--raw", "/api/v1/namespaces/default/pods/netexec:9377/proxy/")
			return out == "netexec"
		})
		if out := c.kubectl.MustRun("", "exec", "netexec", "-c", "c", "--", "/agnhost", "dns-suffix"); !strings.Contains(out, "default.svc.cluster.local") {
			t.Errorf("/agnhost dns-suffix: %q", out)
		}
		if out, errOut, err := c.kubectl.Run("", "exec", "netexec", "-c", "c", "--", "/bin/sh", "-c", "/agnhost connect --timeout=3s hostnames:80"); err != nil {
			t.Errorf("/agnhost connect to a Service from a shell: %v %s %s", err, out, errOut)
		}
		// netexec's /dial, from the pod to a hostnames pod.
		ip := c.kubectl.MustRun("", "get", "pod", pods[0], "-o", "jsonpath={.status.podIP}")
		dial := "http://localhost:8080/dial?request=hostname&protocol=http&host=" + ip + "&port=9376&tries=1"
		if out := c.kubectl.MustRun("", "exec", "netexec", "-c", "c", "--", "curl", "-s", dial); !strings.Contains(out, `"responses":["`+pods[0]) {
			t.Errorf("netexec /dial: %q", out)
		}
		// The volume at /results (which the machine lacks) is the pod's,
		// and the machine did not get a /results.
		c.kubectl.MustRun("", "exec", "netexec", "-c", "c", "--", "sh", "-c", "echo hi > /results/f && cat /results/f")
		if _, err := os.Stat("/results"); err == nil {
			t.Error("a pod's mount target was made on the machine")
		}
	})
	t.Run("kubectl top", func(t *testing.T) {
		c := c.in(t)
		// The node agents measure every 10s; a pod has a rate from the
		// first measure after it started.
		var out string
		c.until("kubectl top pods to show the hostnames pods", time.Minute, func() bool {
			out, _, _ = c.kubectl.Run("", "top", "pods", "-l", "app=hostnames", "--no-headers")
			return strings.Count(out, "hostnames-") == len(pods)
		})
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) != 3 || !strings.HasSuffix(f[1], "m") || !strings.HasSuffix(f[2], "Mi") || f[2] == "0Mi" {
				t.Errorf("kubectl top pods row %q: want NAME CPU(m) MEMORY(Mi), some memory", line)
			}
		}
		c.until("kubectl top nodes", time.Minute, func() bool {
			out, _, _ = c.kubectl.Run("", "top", "nodes", "--no-headers")
			return strings.HasPrefix(out, "node-1 ")
		})
		if f := strings.Fields(out); len(f) < 5 || !strings.HasSuffix(f[3], "Mi") {
			t.Errorf("kubectl top nodes: %q", out)
		}
		// A pod is measured from the first measure after it started.
		c.until("kubectl top pod --containers to show netexec's two containers", time.Minute, func() bool {
			out, _, _ = c.kubectl.Run("", "top", "pod", "netexec", "--containers", "--no-headers")
			return strings.Count(out, "netexec") == 2
		})
	})
	t.Run("unknown image fails at once", func(t *testing.T) {
		c := c.in(t)
		out, errOut, err := c.kubectl.Run("", "run", "nope", "-i", "--rm", "--restart=Never", "--image=httpd:2.4", "--", "true")
		if err == nil || !strings.Contains(out+errOut, "not built into svcnet") {
			t.Errorf("kubectl run -i of an image svcnet lacks: %v\nstdout %s\nstderr %s", err, out, errOut)
		}
		if reason := c.kubectl.MustRun("", "get", "events", "--field-selector", "involvedObject.name=nope", "-o", "jsonpath={.items[*].reason}"); !strings.Contains(reason, "Failed") {
			t.Logf("events of the failed pod: %q", reason)
		}
	})
	for _, v := range framework.KubectlVersions {
		k := framework.NewKubectl(t, v, c.kubectl.Kubeconfig)
		t.Run("run -i --rm with kubectl "+v, func(t *testing.T) {
			k := k.For(t)
			name := "runi-" + strings.ReplaceAll(v, ".", "-")
			out, errOut, err := k.Run("hello\n", "run", name, "-i", "--rm", "--restart=Never", "--image=busybox",
				"--", "sh", "-c", `read x; echo "got $x"`)
			if err != nil || !strings.Contains(out, "got hello") {
				t.Errorf("kubectl run -i: %v\nstdout %q\nstderr %s", err, out, errOut)
			}
		})
		t.Run("cp with kubectl "+v, func(t *testing.T) {
			k := k.For(t)
			// kubectl cp is tar through exec: in, then out again.
			local := filepath.Join(t.TempDir(), "f.txt")
			if err := os.WriteFile(local, []byte("copied in by "+v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			k.MustRun("", "cp", local, "bbsleep:/tmp/f-"+v+".txt")
			if out := k.MustRun("", "exec", "bbsleep", "--", "cat", "/tmp/f-"+v+".txt"); out != "copied in by "+v+"\n" {
				t.Errorf("after kubectl cp into the pod, exec reads %q", out)
			}
			back := filepath.Join(t.TempDir(), "back.txt")
			k.MustRun("", "cp", "bbsleep:/tmp/f-"+v+".txt", back)
			if data, _ := os.ReadFile(back); string(data) != "copied in by "+v+"\n" {
				t.Errorf("kubectl cp out of the pod: %q", data)
			}
		})
		t.Run("top with kubectl "+v, func(t *testing.T) {
			k := k.For(t)
			// The metrics are there (the kubectl top subtest waited).
			if out := k.MustRun("", "top", "pods", "-l", "app=hostnames", "--no-headers"); strings.Count(out, "hostnames-") != len(pods) {
				t.Errorf("kubectl top pods: %q", out)
			}
			if out := k.MustRun("", "top", "nodes", "--no-headers"); !strings.HasPrefix(out, "node-1 ") {
				t.Errorf("kubectl top nodes: %q", out)
			}
		})
		t.Run("attach with kubectl "+v, func(t *testing.T) {
			c, k := c.in(t), k.For(t)
			name := "attach-" + strings.ReplaceAll(v, ".", "-")
			k.MustRun(`
apiVersion: v1
kind: Pod
metadata: {name: `+name+`}
spec:
  restartPolicy: Never
  containers:
  - {name: c, image: busybox, stdin: true, stdinOnce: true, command: [sh, -c, 'while read l; do echo "echo:$l"; done; echo bye']}
`, "apply", "-f", "-")
			c.until(name+" running", time.Minute, func() bool {
				out, _, _ := k.Run("", "get", "pod", name, "-o", "jsonpath={.status.phase}")
				return out == "Running"
			})
			out, errOut, err := k.Run("a\nb\n", "attach", "-i", name)
			if err != nil || !strings.Contains(out, "echo:a\necho:b\nbye") {
				t.Errorf("kubectl attach -i: %v\nstdout %q\nstderr %s", err, out, errOut)
			}
		})
		t.Run("port-forward to a pod with kubectl "+v, func(t *testing.T) {
			k := k.For(t)
			if got := portForwardGet(t, k, "pod/"+pods[0], "9376"); got != pods[0] {
				t.Errorf("through the forwarded port: %q, want %q", got, pods[0])
			}
		})
		t.Run("port-forward to a Service with kubectl "+v, func(t *testing.T) {
			k := k.For(t)
			// kubectl picks one of the Service's pods and its target port.
			got := portForwardGet(t, k, "svc/hostnames", "80")
			if !strings.HasPrefix(got, "hostnames-") {
				t.Errorf("through the forwarded Service port: %q", got)
			}
		})
	}
	t.Run("run -i --rm of containers that exit at once", func(t *testing.T) {
		for _, v := range framework.KubectlVersions {
			k := framework.NewKubectl(t, v, c.kubectl.Kubeconfig)
			t.Run("kubectl "+v, func(t *testing.T) {
				t.Parallel()
				runExitAtOnce(t, k.For(t), "exit-"+strings.ReplaceAll(v, ".", "-"), 100)
			})
		}
	})
}

var forwardingRE = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) ->`)

// portForwardGet runs kubectl port-forward to target's port on a free
// local port and returns the body of one HTTP GET through it.
func portForwardGet(t *testing.T, k *framework.Kubectl, target, port string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.Path, "port-forward", target, ":"+port)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+k.Kubeconfig, "HOME="+t.TempDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	local := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := forwardingRE.FindStringSubmatch(sc.Text()); m != nil {
				local <- m[1]
			}
		}
	}()
	var p string
	select {
	case p = <-local:
	case <-ctx.Done():
		t.Fatalf("kubectl port-forward %s never said where it listens: %s", target, stderr.String())
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+p+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET through the forwarded port: %v (kubectl: %s)", err, stderr.String())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(body))
}

// runExitAtOnce runs n pods with kubectl run -i --rm whose container
// exits right after its last write, and fails unless kubectl printed
// all of the output every time. Every other container writes a line and
// exits at once, without reading, so the attach races its end: before
// the write, the line comes through the attach; after the exit, the
// node says the container is not running and kubectl prints the logs;
// in between, the first attach of a stdinOnce container gets what was
// written before it. The others read a line, then write a few KiB in
// short lines and exit: all of it comes while attached, quicker than
// the node agent, the API server and kubectl pass it on. A run takes
// about 0.5 s: the kubectl versions' runs go side by side.
func runExitAtOnce(t *testing.T, k *framework.Kubectl, prefix string, n int) {
	var burst strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&burst, "%d\n", i)
	}
	var lost []string
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		script, want := fmt.Sprintf("echo %s wrote this and exited", name), name+" wrote this and exited\n"
		if i%2 == 1 {
			script = `read x; echo "got $x"; i=0; while [ $i -lt 2000 ]; do echo $i; i=$((i+1)); done; echo end`
			want = "got " + name + "\n" + burst.String() + "end\n"
		}
		out, errOut, err := k.Run(name+"\n", "run", name, "-i", "--rm", "--restart=Never", "--image=busybox", "--", "sh", "-c", script)
		got := strings.TrimSuffix(out, fmt.Sprintf("pod %q deleted\n", name))
		if err != nil || got != want {
			lost = append(lost, fmt.Sprintf("%s: %v, %d of %d bytes, ending %q; stderr %s", name, err, len(got), len(want), got[max(0, len(got)-40):], errOut))
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d kubectl run -i --rm lost output:\n%s", len(lost), n, strings.Join(lost[:min(len(lost), 5)], "\n"))
	}
}
