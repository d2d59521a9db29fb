package apiserver_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/internal/freeport"
	"github.com/svcnet/svcnet/internal/pki"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// etcdMember is one `svcnet etcd` process of a test cluster.
type etcdMember struct {
	name, client string
	args         []string
	proc         *framework.Process
}

// TestEtcdCluster: three `svcnet etcd` members form a cluster that an API
// server uses through --etcd-servers. Killing the leader (SIGKILL) during
// steady writes loses no acknowledged write and the writes go on; the
// member, restarted on its data directory, rejoins and catches up.
func TestEtcdCluster(t *testing.T) {
	dir := t.TempDir()
	files, err := pki.EnsureEtcd(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	var members []*etcdMember
	var initial, clients []string
	for i := range 3 {
		name := fmt.Sprintf("m%d", i+1)
		peer := "https://" + freeport.Addr(t)
		m := &etcdMember{name: name, client: "https://" + freeport.Addr(t)}
		m.args = []string{"etcd", "--name", name, "--data-dir", filepath.Join(dir, name),
			"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--cert-file", files.ServerCert, "--key-file", files.ServerKey, "--trusted-ca-file", files.CA, "--client-cert-auth",
			"--peer-cert-file", files.PeerCert, "--peer-key-file", files.PeerKey, "--peer-trusted-ca-file", files.CA, "--peer-client-cert-auth",
			"--log-level", "warn", "--ready-timeout", "2m"}
		initial = append(initial, name+"="+peer)
		clients = append(clients, m.client)
		members = append(members, m)
	}
	for _, m := range members {
		m.args = append(m.args, "--initial-cluster", strings.Join(initial, ","))
		m.proc = framework.StartProcess(t, m.args...)
	}
	tlsCfg := framework.TLSConfig(t, files.CA, files.ClientCert, files.ClientKey)
	status := func(m *etcdMember) (*clientv3.StatusResponse, error) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.client}, DialTimeout: 2 * time.Second, TLS: tlsCfg})
		if err != nil {
			return nil, err
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return cli.Status(ctx, m.client)
	}
	var leader *etcdMember
	waitFor(t, "the three members to elect a leader", time.Minute, func() bool {
		for _, m := range members {
			st, err := status(m)
			if err != nil {
				return false
			}
			if st.Leader == st.Header.MemberId {
				leader = m
			}
		}
		return leader != nil
	})

	s := framework.StartAPIServer(t, "--etcd-servers", strings.Join(clients, ","),
		"--etcd-cafile", files.CA, "--etcd-certfile", files.ClientCert, "--etcd-keyfile", files.ClientKey)
	client := s.Client()

	// Steady writes, one after the other, each recorded once the API
	// server acknowledged it.
	const total = 150
	var mu sync.Mutex
	var acked []string
	var failures []string
	done := make(chan struct{})
	// A failed wait below ends the test: the writer stops with it.
	var stop atomic.Bool
	t.Cleanup(func() { stop.Store(true); <-done })
	go func() {
		defer close(done)
		for i := range total {
			if stop.Load() {
				return
			}
			name := fmt.Sprintf("cm-%03d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"i": fmt.Sprint(i)}}, metav1.CreateOptions{})
			cancel()
			mu.Lock()
			if err == nil {
				acked = append(acked, name)
			} else {
				failures = append(failures, fmt.Sprintf("%s: %v", name, err))
			}
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	ackedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	waitFor(t, "30 acknowledged writes", time.Minute, func() bool { return ackedCount() >= 30 })
	t.Logf("killing the leader %s (SIGKILL) after %d writes", leader.name, ackedCount())
	leader.proc.Kill()
	atKill := ackedCount()
	waitFor(t, "50 more writes with the leader gone", 2*time.Minute, func() bool { return ackedCount() >= atKill+50 })
	<-done
	if len(failures) > 5 {
		t.Errorf("%d of %d writes failed while one member of three was down: %s", len(failures), total, strings.Join(failures, "; "))
	} else if len(failures) > 0 {
		t.Logf("writes refused during the election: %s", strings.Join(failures, "; "))
	}

	// Every acknowledged write is there.
	ctx := framework.Context(t, 30*time.Second)
	list, err := client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, cm := range list.Items {
		stored[cm.Name] = true
	}
	for _, name := range acked {
		if !stored[name] {
			t.Errorf("acknowledged write %s is lost", name)
		}
	}

	// The killed member rejoins from its data directory and catches up:
	// a serializable read answers from its own copy.
	leader.proc = framework.StartProcess(t, leader.args...)
	waitFor(t, leader.name+" to hold every acknowledged write", 2*time.Minute, func() bool {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{leader.client}, DialTimeout: 2 * time.Second, TLS: tlsCfg})
		if err != nil {
			return false
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, "/registry/configmaps/default/cm-", clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
		return err == nil && resp.Count >= int64(len(acked))
	})
	// And the cluster has three healthy members again.
	for _, m := range members {
		if _, err := status(m); err != nil {
			t.Errorf("member %s: %v", m.name, err)
		}
	}
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// TestAPIServersShareAllocations: three API servers on one etcd cluster
// allocate at once. 1,000 Services created concurrently, spread over the
// three, get distinct cluster IPs and node ports; every cluster IP is an
// IPAddress naming its Service (kube-apiserver's record, which kubectl
// lists); a delete on one server frees the values for all.
func TestAPIServersShareAllocations(t *testing.T) {
	store := framework.StartEtcd(t)
	var servers []*framework.APIServer
	var clients []kubernetes.Interface
	for range 3 {
		s := framework.StartAPIServer(t, store.APIServerArgs()...)
		servers = append(servers, s)
		clients = append(clients, s.Client())
	}

	const n = 1000
	names := make(chan int, n)
	for i := range n {
		names <- i
	}
	close(names)
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Go(func() {
			for i := range names {
				typ := corev1.ServiceTypeClusterIP
				if i%2 == 0 {
					typ = corev1.ServiceTypeNodePort
				}
				svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%04d", i)},
					Spec: corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{Port: 80}}}}
				c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := clients[(i+w)%3].CoreV1().Services("default").Create(c, svc, metav1.CreateOptions{})
				cancel()
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s: %v", svc.Name, err))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d creates failed: %s", len(failures), strings.Join(failures[:min(5, len(failures))], "; "))
	}

	lctx := framework.Context(t, time.Minute)
	list, err := clients[0].CoreV1().Services("default").List(lctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	assertDistinct(t, list.Items)
	byIP, nodePorts := map[string]string{}, 0
	for _, s := range list.Items {
		byIP[s.Spec.ClusterIP] = s.Name
		for _, p := range s.Spec.Ports {
			if p.NodePort != 0 {
				nodePorts++
			}
		}
	}
	if len(list.Items) != n+1 || len(byIP) != n+1 || nodePorts != n/2 {
		t.Errorf("%d Services with %d cluster IPs and %d node ports, want %d, %d and %d", len(list.Items), len(byIP), nodePorts, n+1, n+1, n/2)
	}
	addrs, err := clients[1].NetworkingV1().IPAddresses().List(lctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs.Items) != len(byIP) {
		t.Errorf("%d IPAddresses for %d cluster IPs", len(addrs.Items), len(byIP))
	}
	for _, a := range addrs.Items {
		ref := a.Spec.ParentRef
		if ref == nil || ref.Resource != "services" || byIP[a.Name] != ref.Name || a.Labels["ipaddress.kubernetes.io/managed-by"] != "ipallocator.k8s.io" {
			t.Errorf("IPAddress %s: parent %+v, labels %v; the Service holding it is %q", a.Name, ref, a.Labels, byIP[a.Name])
		}
	}
	k := framework.NewKubectl(t, "1.33", servers[2].Kubeconfig)
	out := k.MustRun("", "get", "servicecidrs,ipaddresses", "--no-headers")
	if !strings.Contains(out, "servicecidr.networking.k8s.io/kubernetes") || strings.Count(out, "ipaddress.networking.k8s.io/") != len(byIP) {
		t.Errorf("kubectl get servicecidrs,ipaddresses: %d lines:\n%.400s", strings.Count(out, "\n"), out)
	}

	// Deleted on one server, taken again through another.
	victim := list.Items[0]
	if victim.Name == "kubernetes" {
		victim = list.Items[1]
	}
	if err := clients[0].CoreV1().Services("default").Delete(lctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := clients[1].NetworkingV1().IPAddresses().Get(lctx, victim.Spec.ClusterIP, metav1.GetOptions{}); err == nil {
		t.Errorf("the IPAddress of deleted %s is still there", victim.Name)
	}
	again := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "again"},
		Spec: corev1.ServiceSpec{ClusterIP: victim.Spec.ClusterIP, Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := clients[2].CoreV1().Services("default").Create(lctx, again, metav1.CreateOptions{}); err != nil {
		t.Errorf("%s, freed through one server, cannot be taken through another: %v", victim.Spec.ClusterIP, err)
	}
	// And a value held through another server is refused.
	taken := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "taken"},
		Spec: corev1.ServiceSpec{ClusterIP: victim.Spec.ClusterIP, Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := clients[0].CoreV1().Services("default").Create(lctx, taken, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "already allocated") {
		t.Errorf("a cluster IP held through another server: %v, want already allocated", err)
	}
}

// TestAllocationRepair: the API server's repair loop records a cluster
// IP whose IPAddress is missing, and frees an IPAddress of the allocator
// that no Service holds (at the third repair); a user's IPAddress stays.
func TestAllocationRepair(t *testing.T) {
	s := framework.StartAPIServer(t, "--allocation-repair-interval", "300ms")
	c := s.Client()
	ctx := framework.Context(t, time.Minute)
	svc, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip := svc.Spec.ClusterIP
	if err := c.NetworkingV1().IPAddresses().Delete(ctx, ip, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	leak := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.96.0.200",
		Labels: map[string]string{"ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "crashed"}}}
	user := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.96.0.201"},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Group: "gateway.networking.k8s.io", Resource: "gateways", Namespace: "default", Name: "gw"}}}
	for _, a := range []*networkingv1.IPAddress{leak, user} {
		if _, err := c.NetworkingV1().IPAddresses().Create(ctx, a, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the repair to record "+ip+" again and free the leaked address", 30*time.Second, func() bool {
		got, err := c.NetworkingV1().IPAddresses().Get(ctx, ip, metav1.GetOptions{})
		_, leakErr := c.NetworkingV1().IPAddresses().Get(ctx, leak.Name, metav1.GetOptions{})
		return err == nil && got.Spec.ParentRef != nil && got.Spec.ParentRef.Name == "web" && apierrors.IsNotFound(leakErr)
	})
	if _, err := c.NetworkingV1().IPAddresses().Get(ctx, user.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the repair removed a user's IPAddress: %v", err)
	}
	// The user's address is taken for Services too.
	_, err = c.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "on-user-ip"},
		Spec: corev1.ServiceSpec{ClusterIP: user.Name, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "already allocated") {
		t.Errorf("a Service on an address another resource holds: %v", err)
	}
}

// TestKubernetesEndpointsFollowAPIServers: default/kubernetes lists every
// API server with a live lease (kube-apiserver's lease endpoint
// reconciler). One that shuts down leaves at once; one killed leaves
// when its lease expires (15 s, renewed every 10 s).
func TestKubernetesEndpointsFollowAPIServers(t *testing.T) {
	store := framework.StartEtcd(t)
	// One port on three loopback addresses: the endpoints carry one port
	// for all servers, as kube-apiserver's do.
	_, port, _ := net.SplitHostPort(freeport.Addr(t))
	// The advertised addresses are only published, never dialed (an
	// endpoint may not be loopback).
	binds := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	ips := []string{"10.255.0.2", "10.255.0.3", "10.255.0.4"}
	var servers []*framework.APIServer
	for i, ip := range ips {
		servers = append(servers, framework.StartAPIServer(t,
			store.APIServerArgs("--bind-address", binds[i], "--secure-port", port, "--advertise-address", ip)...))
	}
	cfg := servers[0].Config("admin")
	cfg.WarningHandler = rest.NoWarnings{}
	client := kubernetes.NewForConfigOrDie(cfg)
	listed := func() string {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ep, err := client.CoreV1().Endpoints("default").Get(c, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		slice, err := client.DiscoveryV1().EndpointSlices("default").Get(c, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		var a, b []string
		for _, s := range ep.Subsets {
			for _, addr := range s.Addresses {
				a = append(a, addr.IP+":"+fmt.Sprint(s.Ports[0].Port))
			}
		}
		for _, e := range slice.Endpoints {
			b = append(b, e.Addresses[0]+":"+fmt.Sprint(*slice.Ports[0].Port))
		}
		if strings.Join(a, ",") != strings.Join(b, ",") {
			return fmt.Sprintf("Endpoints %v but EndpointSlice %v", a, b)
		}
		return strings.Join(a, ",")
	}
	want := func(ips ...string) string {
		var out []string
		for _, ip := range ips {
			out = append(out, ip+":"+port)
		}
		return strings.Join(out, ",")
	}
	waitForValue(t, "every API server in default/kubernetes", 30*time.Second, listed, want(ips...))
	// And they stay, past a lease's time to live: renewals renew.
	for end := time.Now().Add(masterLeaseTTLAndTick); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if got := listed(); got != want(ips...) {
			t.Fatalf("default/kubernetes flapped to %q, want %q", got, want(ips...))
		}
	}
	// Shut down: out before its lease could have expired.
	servers[2].Stop()
	waitForValue(t, "the stopped server out of default/kubernetes", 8*time.Second, listed, want(ips[0], ips[1]))
	// Killed: out once its lease expired.
	servers[1].Kill()
	waitForValue(t, "the killed server out of default/kubernetes", 45*time.Second, listed, want(ips[0]))
	// Back: in again.
	servers[1].Start()
	waitForValue(t, "the restarted server back in default/kubernetes", 30*time.Second, listed, want(ips[0], ips[1]))
}

// masterLeaseTTLAndTick outlasts an API server's lease (15 s) and one
// renewal period after it.
const masterLeaseTTLAndTick = 27 * time.Second

func waitForValue(t *testing.T, what string, timeout time.Duration, get func() string, want string) {
	t.Helper()
	var got string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		got = get()
		return got == want, nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s: have %q, want %q", timeout, what, got, want)
	}
}
