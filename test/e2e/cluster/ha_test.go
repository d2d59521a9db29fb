package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/loadgen"
)

// TestHighlyAvailableControlPlane runs `svcnet up --control-planes 3`:
// three hosts, each with an etcd member, an API server on the etcd
// cluster and a controller manager, the API balanced by the edge over
// their /readyz. Under steady writes (through the balancer, as kubectl
// goes) and NodePort traffic, it kills -9 one etcd member, one API
// server, the leading controller manager, then every etcd member and API
// server at once: the cluster
// serves on, no acknowledged write is lost (the ledger against the
// stored objects), no request of the data path fails, and every killed
// process is back, each recovery timed.
func TestHighlyAvailableControlPlane(t *testing.T) {
	t.Parallel()
	c := up(t, 2, "--control-planes", "3")
	k := c.kubectl
	cps := []string{"cp-1", "cp-2", "cp-3"}
	ips := []string{"172.18.1.11", "172.18.1.12", "172.18.1.13"}
	c.until("default/kubernetes to list the three API servers", time.Minute, func() bool {
		out, _, _ := k.Run("", "get", "endpoints", "kubernetes", "-o", "jsonpath={.subsets[0].addresses[*].ip}")
		got := strings.Fields(out)
		slices.Sort(got)
		return slices.Equal(got, ips)
	})
	if out := k.MustRun("", "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}"); !strings.HasPrefix(out, "https://127.0.0.1:") {
		t.Errorf("kubeconfig server %q, want the host's loopback door to the balancer", out)
	}
	k.MustRun(examples(t), "apply", "-f", "-")
	k.MustRun("", "rollout", "status", "deployment/hostnames", "--timeout=2m")
	leader := func() string {
		out, _, _ := k.Run("", "-n", "kube-system", "get", "lease", "svcnet-controller-manager", "-o", "jsonpath={.spec.holderIdentity}")
		return out
	}

	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(c.home, c.name, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst, rc.Timeout = 100, 100, 5*time.Second
	client := kubernetes.NewForConfigOrDie(rc)
	k.MustRun("", "create", "namespace", "ledger")
	target := loadgen.Target{Name: "NodePort", URL: "http://172.18.0.11:8477/", Rate: 20, Dial: nsDialer("svcnet-" + c.name + "-client"), Timeline: true}
	c.untilAnswering(target)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	led := newLedger(client)
	var httpResults []loadgen.Result
	var writes []loadgen.Outcome
	wg.Add(2)
	go func() { defer wg.Done(); httpResults = loadgen.Run(ctx, target) }()
	go func() {
		defer wg.Done()
		writes = loadgen.Every(ctx, 10, 10, led.writeConfigMap)
	}()

	processOf := func(cp, what string) []string { return []string{" " + what + " ", "netns=svcnet-" + c.name + "-" + cp} }
	kill := func(t *testing.T, cp, what string) int {
		pids := c.pidsWith(processOf(cp, what)...)
		if len(pids) != 1 {
			t.Fatalf("%s's %s: pids %v, want one", cp, what, pids)
		}
		if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		return pids[0]
	}
	back := func(cp, what string, old int) bool {
		pids := c.pidsWith(processOf(cp, what)...)
		return len(pids) == 1 && pids[0] != old
	}
	ready := func(i int) bool {
		out, err := c.exec("cp/"+cps[i], "curl", "-s", "--max-time", "2", "--cacert", filepath.Join(c.home, c.name, "apiserver", "pki", "ca.crt"),
			"https://"+ips[i]+":6443/readyz")
		return err == nil && out == "ok"
	}
	allReady := func() bool { return ready(0) && ready(1) && ready(2) }
	memberHealthy := func(i int) bool {
		// The API server on the same host answers readyz only with its
		// etcd client connected; the member itself: etcd's /health.
		dir := filepath.Join(c.home, c.name, "control-planes", cps[i], "etcd-pki")
		out, err := c.exec("cp/"+cps[i], "curl", "-s", "--max-time", "2", "--cacert", filepath.Join(c.home, c.name, "apiserver", "pki", "etcd", "ca.crt"),
			"--cert", filepath.Join(dir, "server.crt"), "--key", filepath.Join(dir, "server.key"), "https://"+ips[i]+":2379/health")
		return err == nil && strings.Contains(out, `"health":"true"`)
	}
	c.until("every API server ready", time.Minute, allReady)
	firstLeader := leader()
	if firstLeader == "" {
		t.Error("no controller manager holds the leader lease")
	}
	time.Sleep(3 * time.Second) // a quiet start

	type window struct {
		name     string
		from, to time.Time
		recover  time.Duration
	}
	var windows []window
	fault := func(name string, do func(t *testing.T) func() bool) {
		from := time.Now()
		recovered := do(t)
		c.until("recovery from "+name, 3*time.Minute, recovered)
		took := time.Since(from)
		time.Sleep(3 * time.Second)
		windows = append(windows, window{name, from, time.Now(), took})
	}
	fault("kill -9 cp-1's etcd member", func(t *testing.T) func() bool {
		old := kill(t, "cp-1", "etcd")
		return func() bool { return back("cp-1", "etcd", old) && memberHealthy(0) && allReady() }
	})
	fault("kill -9 cp-2's API server", func(t *testing.T) func() bool {
		old := kill(t, "cp-2", "apiserver")
		return func() bool { return back("cp-2", "apiserver", old) && allReady() }
	})
	fault("kill -9 the leading controller manager", func(t *testing.T) func() bool {
		held := leader()
		_, pidText, ok := strings.Cut(held, "_")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil {
			t.Fatalf("leader identity %q: want host_pid", held)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		return func() bool { l := leader(); return l != "" && l != held }
	})
	fault("kill -9 every etcd member and API server", func(t *testing.T) func() bool {
		old := map[string]int{}
		for _, cp := range cps {
			for _, what := range []string{"etcd", "apiserver"} {
				old[cp+what] = kill(t, cp, what)
			}
		}
		return func() bool {
			for _, cp := range cps {
				for _, what := range []string{"etcd", "apiserver"} {
					if !back(cp, what, old[cp+what]) {
						return false
					}
				}
			}
			return memberHealthy(0) && memberHealthy(1) && memberHealthy(2) && allReady()
		}
	})
	stop()
	wg.Wait()

	// Every acknowledged write is stored.
	stored := led.storedConfigMaps(t)
	lost := led.lost(t, stored)
	var report []string
	for _, w := range windows {
		sent, failed, kinds := loadgen.Count(writes, w.from, w.to)
		var httpSent, httpFailed int
		for _, r := range httpResults {
			s, f, _ := loadgen.Count(r.Outcomes, w.from, w.to)
			httpSent, httpFailed = httpSent+s, httpFailed+f
		}
		report = append(report, fmt.Sprintf("%-42s writes %3d failed of %3d %v; NodePort %d failed of %d; back in %.1fs",
			w.name, failed, sent, kinds, httpFailed, httpSent, w.recover.Seconds()))
		if httpFailed > 0 {
			t.Errorf("%s: %d of %d NodePort requests failed: the data path must not depend on the control plane", w.name, httpFailed, httpSent)
		}
	}
	for _, r := range httpResults {
		if r.Failed() > 0 {
			t.Errorf("NodePort: %s", r)
		}
	}
	t.Logf("acknowledged writes %d, stored %d, lost %d; controller-manager leader %s, then %s\n%s",
		led.acknowledged(), len(stored), lost, firstLeader, leader(), strings.Join(report, "\n"))
	if n := led.acknowledged(); n < 100 {
		t.Errorf("only %d writes acknowledged: the control plane did not serve", n)
	}
	// Everything as before: the example still answers, a new write lands,
	// the controllers act (a scale-up gets ready pods and endpoints).
	c.untilAnswering(target)
	k.MustRun("", "scale", "deployment/hostnames", "--replicas=4")
	k.MustRun("", "rollout", "status", "deployment/hostnames", "--timeout=2m")
	c.until("four endpoints", time.Minute, func() bool {
		out, _, _ := k.Run("", "get", "endpointslices", "-l", "kubernetes.io/service-name=hostnames", "-o", "jsonpath={.items[*].endpoints[*].addresses[0]}")
		return len(strings.Fields(out)) == 4
	})
	if _, err := client.CoreV1().ConfigMaps("ledger").Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("a write after the faults: %v", err)
	}
}
