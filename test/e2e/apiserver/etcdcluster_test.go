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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

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
		peer := "https://" + freeLoopback(t)
		m := &etcdMember{name: name, client: "https://" + freeLoopback(t)}
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

// freeLoopback returns a loopback address with a port free right now.
func freeLoopback(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
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
