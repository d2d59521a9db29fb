package cluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const statefulWeb = `
apiVersion: v1
kind: Service
metadata: {name: nginx}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{port: 9376}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: nginx
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: c, image: svcnet/hostnames, ports: [{containerPort: 9376}]}]
`

const daemon = `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: c, image: svcnet/hostnames, args: [--port, "9377"]}]
`

const jobs = `
apiVersion: batch/v1
kind: Job
metadata: {name: count}
spec:
  completions: 3
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: host, command: [sh, -c, "echo counted"]}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: indexed}
spec:
  completions: 2
  parallelism: 2
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: host, command: [sh, -c, "echo index=$JOB_COMPLETION_INDEX"]}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: with-sidecar}
spec:
  template:
    spec:
      restartPolicy: Never
      initContainers: [{name: side, image: host, command: [sleep, "3600"], restartPolicy: Always}]
      containers: [{name: c, image: host, command: [sh, -c, "echo main done"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: sidecar-web, labels: {app: sidecar-web}}
spec:
  terminationGracePeriodSeconds: 1
  initContainers: [{name: web, image: svcnet/hostnames, restartPolicy: Always, ports: [{name: web, containerPort: 9376}]}]
  containers: [{name: main, image: host, command: [sleep, "3600"]}]
---
apiVersion: v1
kind: Service
metadata: {name: sidecar-web}
spec:
  selector: {app: sidecar-web}
  ports: [{port: 80, targetPort: web}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: doomed}
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: host, command: [sh, -c, "exit 3"]}]
`

// TestStatefulSetsAndJobs: a StatefulSet's stable pod names, started in
// order, each with its DNS name under the headless Service, scaled down
// from the highest ordinal; a DaemonSet's pod on the node, rolled; Jobs
// run to completion, by index, with a sidecar, and fail past their
// backoff limit; a Service on a sidecar's named port.
func TestStatefulSetsAndJobs(t *testing.T) {
	t.Parallel()
	c := up(t, 1)
	k := c.kubectl
	k.MustRun(statefulWeb, "apply", "-f", "-")
	k.MustRun(jobs, "apply", "-f", "-")
	k.MustRun(daemon, "apply", "-f", "-")

	t.Run("StatefulSet", func(t *testing.T) {
		c := c.in(t)
		k := c.kubectl
		c.until("3 ready StatefulSet pods", 2*time.Minute, func() bool {
			out, _, _ := k.Run("", "get", "statefulset", "web", "-o", "jsonpath={.status.readyReplicas}")
			return out == "3"
		})
		// Ordered: each pod was created after the one before became ready.
		for _, pair := range [][2]string{{"web-0", "web-1"}, {"web-1", "web-2"}} {
			readyAt := k.MustRun("", "get", "pod", pair[0], "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].lastTransitionTime}`)
			created := k.MustRun("", "get", "pod", pair[1], "-o", "jsonpath={.metadata.creationTimestamp}")
			if created < readyAt {
				t.Errorf("%s created at %s, before %s was ready at %s", pair[1], created, pair[0], readyAt)
			}
		}
		for _, name := range []string{"web-0", "web-1", "web-2"} {
			ip := k.MustRun("", "get", "pod", name, "-o", "jsonpath={.status.podIP}")
			out, err := c.exec("default/web-0", "getent", "hosts", name+".nginx.default.svc.cluster.local")
			if err != nil || !strings.HasPrefix(out, ip+" ") {
				t.Errorf("%s.nginx resolves to %q (%v), want %s", name, out, err, ip)
			}
			// With curl's timings (name lookup, connect, total): this
			// check failed intermittently with the name lookup never done
			// in 5 s; the likely cause, the pod bridge's address changing
			// with its ports, is mended (internal/cluster's bridgeMAC),
			// and the diagnostics stay until it is seen no more. getent of web-0's
			// own name answers from its /etc/hosts, not the DNS: in the
			// failures so far the node-local cache had received no
			// question at all (its counters 0, the node's UDP counters 0)
			// while web-0's questions to 10.96.0.10 were answered; the
			// node's raw PREROUTING NOTRACK rule for 169.254.20.10:53
			// counted twice web-0's datagrams to it (bridge and IP
			// hooks), and web-0's gateway MAC was the bridge's.
			out, err = c.exec("default/web-0", "curl", "-s", "--max-time", "5", "-w", `\n%{time_namelookup} %{time_connect} %{time_total}`, name+".nginx:9376")
			if got, _, _ := strings.Cut(out, "\n"); err != nil || got != name {
				t.Errorf("%s.nginx:9376 answered %q (%v); timings: namelookup connect total", name, out, err)
				// What each server says, each type asked alone.
				for _, server := range []string{"169.254.20.10", "10.96.0.10"} {
					for _, qtype := range []string{"A", "AAAA"} {
						out, err := c.exec("default/web-0", "dig", "+tries=1", "+time=2", "@"+server, name+".nginx.default.svc.cluster.local", qtype)
						t.Logf("dig @%s %s: %v\n%s", server, qtype, err, out)
					}
				}
				resolv, err := c.exec("default/web-0", "cat", "/etc/resolv.conf")
				t.Logf("web-0's resolv.conf: %v\n%s", err, resolv)
				// Where web-0 sends them: its routes and neighbours, and
				// its own UDP counters (a query sent shows as OutDatagrams).
				for _, argv := range [][]string{
					{"ip", "-4", "route"},
					{"ip", "neigh"},
					{"ip", "-s", "link", "show", "eth0"},
					{"sh", "-c", "grep -E '^Udp:' /proc/net/snmp"},
				} {
					out, err := c.exec("default/web-0", argv...)
					t.Logf("web-0 %v: %v\n%s", argv, err, out)
				}
				// Whether queries reach the cache's sockets (their queues
				// and drops, and who holds them), the address it serves on,
				// and the kernel's UDP counters (NoPorts, RcvbufErrors);
				// what the filter table does to packets for the node, and
				// the node's neighbours and IP counters (drops on the way in).
				for _, argv := range [][]string{
					{"iptables-save", "-t", "raw"},
					{"iptables-save", "-t", "filter"},
					{"ip", "neigh"},
					{"sh", "-c", "grep -E '^Ip:' /proc/net/snmp; nstat -az | grep -Ei 'InNoRoutes|InAddrErrors|InDiscards|ReversePath|Martian'"},
					{"conntrack", "-S"},
					{"sh", "-c", "curl -s 127.0.0.1:9253/metrics | grep -E '^(svcnet|coredns|process_start)' | grep -v bucket"},
					{"ss", "-uanpm", "sport = :53"},
					{"ip", "-4", "addr", "show", "dev", "lo"},
					{"sh", "-c", "grep -E '^Udp:' /proc/net/snmp"},
					// Whether web-0's gateway MAC is the bridge's, and what
					// the bridge has learnt and counted; every nft table
					// (not only iptables'), in case one drops on input.
					{"ip", "-s", "link", "show", "cbr0"},
					{"bridge", "fdb", "show", "br", "cbr0"},
					{"nft", "list", "ruleset"},
				} {
					out, err := c.exec("node/node-1", argv...)
					t.Logf("node-1 %v: %v\n%s", argv, err, out)
				}
			}
		}
		k.MustRun("", "scale", "statefulset", "web", "--replicas=1")
		// OrderedReady: web-1's deletion starts only once web-2 is gone.
		// One list is one consistent view of both.
		c.until("web-2 and web-1 gone, in that order", time.Minute, func() bool {
			out, _, err := k.Run("", "get", "pods", "-l", "app=web", "-o",
				`jsonpath={range .items[*]}{.metadata.name}={.metadata.deletionTimestamp}{" "}{end}`)
			if err != nil {
				return false
			}
			seen := map[string]string{}
			for _, f := range strings.Fields(out) {
				name, deleting, _ := strings.Cut(f, "=")
				seen[name] = deleting
			}
			if _, web2 := seen["web-2"]; web2 && seen["web-1"] != "" {
				t.Errorf("web-1 is being deleted while web-2 is still there: %s", out)
			}
			_, web1 := seen["web-1"]
			_, web2 := seen["web-2"]
			return !web1 && !web2
		})
	})

	t.Run("DaemonSet", func(t *testing.T) {
		c := c.in(t)
		k := c.kubectl
		k.MustRun("", "rollout", "status", "daemonset/agent", "--timeout=60s")
		node := k.MustRun("", "get", "pods", "-l", "app=agent", "-o", "jsonpath={.items[*].spec.nodeName}")
		if node != "node-1" {
			t.Errorf("DaemonSet pods on %q, want one on node-1", node)
		}
		first := k.MustRun("", "get", "pods", "-l", "app=agent", "-o", "jsonpath={.items[*].metadata.name}")
		k.MustRun("", "set", "env", "daemonset/agent", "ROLLED=1")
		k.MustRun("", "rollout", "status", "daemonset/agent", "--timeout=60s")
		c.until("the old pod replaced", time.Minute, func() bool {
			now, _, _ := k.Run("", "get", "pods", "-l", "app=agent", "-o", "jsonpath={.items[*].metadata.name}")
			return now != "" && now != first && !strings.Contains(now, " ")
		})
	})

	t.Run("Jobs", func(t *testing.T) {
		c := c.in(t)
		k := c.kubectl
		k.MustRun("", "wait", "--for=condition=complete", "job/count", "job/indexed", "--timeout=90s")
		if got := k.MustRun("", "get", "job", "count", "-o", "jsonpath={.status.succeeded}"); got != "3" {
			t.Errorf("count succeeded %s times, want 3", got)
		}
		if got := k.MustRun("", "get", "job", "indexed", "-o", "jsonpath={.status.completedIndexes}"); got != "0-1" {
			t.Errorf("completedIndexes %q", got)
		}
		logs := k.MustRun("", "logs", "-l", "batch.kubernetes.io/job-name=indexed")
		if !strings.Contains(logs, "index=0") || !strings.Contains(logs, "index=1") {
			t.Errorf("indexed logs: %q", logs)
		}
		// A sidecar (restartable init container) runs beside the Job's
		// container and is stopped when it is done, or the Job never
		// completes; a Service reaches a sidecar's named port.
		k.MustRun("", "wait", "--for=condition=complete", "job/with-sidecar", "--timeout=90s")
		k.MustRun("", "wait", "--for=condition=ready", "pod/sidecar-web", "--timeout=90s")
		ip := k.MustRun("", "get", "service", "sidecar-web", "-o", "jsonpath={.spec.clusterIP}")
		c.until("the sidecar's named port served through its Service", time.Minute, func() bool {
			out, err := c.exec("node/node-1", "curl", "-s", "--max-time", "2", ip+":80")
			if err == nil && strings.TrimSpace(out) == "sidecar-web" {
				return true
			}
			eps, _, _ := k.Run("", "get", "endpointslices", "-l", "kubernetes.io/service-name=sidecar-web", "-o", "wide")
			c.lastErr = fmt.Errorf("answer %q (%v); slices:\n%s", out, err, eps)
			return false
		})
		k.MustRun("", "wait", "--for=condition=failed", "job/doomed", "--timeout=90s")
		if got := k.MustRun("", "get", "job", "doomed", "-o", `jsonpath={.status.conditions[?(@.type=="Failed")].reason}`); got != "BackoffLimitExceeded" {
			t.Errorf("doomed failed with %q", got)
		}
		if out := k.MustRun("", "get", "jobs"); !strings.Contains(out, "Complete") || !strings.Contains(out, "Failed") {
			t.Errorf("kubectl get jobs:\n%s", out)
		}
	})
}
