package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/svcnet/svcnet/internal/etcd"
	"github.com/svcnet/svcnet/internal/pki"
)

// EtcdPorts reads where an API server's embedded etcd serves: the
// ports.json in its data directory.
func EtcdPorts(t testing.TB, dataDir string) (client, peer int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dataDir, "etcd", "ports.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ Client, Peer int }
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	return p.Client, p.Peer
}

// TLSConfig trusts caFile and, when certFile is set, presents that
// client certificate.
func TLSConfig(t testing.TB, caFile, certFile, keyFile string) *tls.Config {
	t.Helper()
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cfg := &tls.Config{RootCAs: pool}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// EtcdGet reads key straight from an API server's embedded etcd, as the
// API server does (its etcd client certificate), bypassing the API: what
// is really stored, encrypted or not.
func EtcdGet(t testing.TB, dataDir, key string) []byte {
	t.Helper()
	port, _ := EtcdPorts(t, dataDir)
	pki := filepath.Join(dataDir, "pki")
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{fmt.Sprintf("https://127.0.0.1:%d", port)}, DialTimeout: 5 * time.Second,
		TLS: TLSConfig(t, filepath.Join(pki, "etcd", "ca.crt"), filepath.Join(pki, "apiserver-etcd-client.crt"), filepath.Join(pki, "apiserver-etcd-client.key"))})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatalf("etcd get %s: %v", key, err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("etcd holds %d values for %s", len(resp.Kvs), key)
	}
	return resp.Kvs[0].Value
}

// ExternalEtcd is an etcd member that a test starts for API servers to
// use with --etcd-servers: mutual TLS, kubeadm's certificate layout.
type ExternalEtcd struct {
	Files    pki.EtcdFiles
	Endpoint string
}

// StartEtcd runs a single-member etcd in the test process until the end
// of the test.
func StartEtcd(t testing.TB) *ExternalEtcd {
	t.Helper()
	dir := t.TempDir()
	files, err := pki.EnsureEtcd(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	member, err := etcd.Start(context.Background(), filepath.Join(dir, "etcd"), etcd.TLS{CA: files.CA, ServerCert: files.ServerCert,
		ServerKey: files.ServerKey, PeerCert: files.PeerCert, PeerKey: files.PeerKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(member.Close)
	return &ExternalEtcd{Files: files, Endpoint: member.Endpoints[0]}
}

// APIServerArgs are kube-apiserver's flags pointing at the member, then
// extra.
func (e *ExternalEtcd) APIServerArgs(extra ...string) []string {
	return append([]string{"--etcd-servers", e.Endpoint,
		"--etcd-cafile", e.Files.CA, "--etcd-certfile", e.Files.ClientCert, "--etcd-keyfile", e.Files.ClientKey}, extra...)
}
