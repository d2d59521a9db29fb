package pki

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/server/options/encryptionconfig"
)

// TestEnsureEtcd: the etcd certificates chain to a CA of etcd's own (not
// the cluster CA, whose client certificates must not open etcd), carry
// the usages etcd checks, are kept on a second call, and every key and
// directory is the owner's only.
func TestEnsureEtcd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	cluster, err := EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := EnsureEtcd(dir)
	if err != nil {
		t.Fatal(err)
	}
	etcdCA, err := LoadCA(filepath.Dir(f.CA))
	if err != nil {
		t.Fatal(err)
	}
	if etcdCA.Cert.Equal(cluster.Cert) {
		t.Fatal("etcd uses the cluster CA")
	}
	roots := x509.NewCertPool()
	roots.AddCert(etcdCA.Cert)
	for _, c := range []struct {
		cert, key string
		usage     x509.ExtKeyUsage
		host      string
	}{
		{f.ServerCert, f.ServerKey, x509.ExtKeyUsageServerAuth, "127.0.0.1"},
		{f.ServerCert, f.ServerKey, x509.ExtKeyUsageClientAuth, ""},
		{f.PeerCert, f.PeerKey, x509.ExtKeyUsageServerAuth, "localhost"},
		{f.PeerCert, f.PeerKey, x509.ExtKeyUsageClientAuth, ""},
		{f.ClientCert, f.ClientKey, x509.ExtKeyUsageClientAuth, ""},
	} {
		pair, err := tls.LoadX509KeyPair(c.cert, c.key)
		if err != nil {
			t.Fatalf("%s: %v", c.cert, err)
		}
		leaf, _ := x509.ParseCertificate(pair.Certificate[0])
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: c.host, KeyUsages: []x509.ExtKeyUsage{c.usage}}); err != nil {
			t.Errorf("%s for %v: %v", filepath.Base(c.cert), c.usage, err)
		}
	}
	pair, _ := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	if leaf, _ := x509.ParseCertificate(pair.Certificate[0]); slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Error("the API server's etcd client certificate can also serve")
	}

	before, _ := os.ReadFile(f.ServerCert)
	if _, err := EnsureEtcd(dir); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(f.ServerCert); string(after) != string(before) {
		t.Error("a second EnsureEtcd issued a new serving certificate")
	}

	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, _ := d.Info()
		switch {
		case d.IsDir() && info.Mode().Perm() != 0o700:
			t.Errorf("directory %s is %v, want 0700", path, info.Mode().Perm())
		case !d.IsDir() && info.Mode().Perm() != 0o600:
			t.Errorf("file %s is %v, want 0600", path, info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEnsureEncryptionConfig: the generated configuration is one
// kube-apiserver's own loader accepts, encrypts Secrets with secretbox,
// differs per cluster, and is never rewritten (that would lose the key).
func TestEnsureEncryptionConfig(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	for _, p := range []string{a, b} {
		if err := EnsureEncryptionConfig(p); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := encryptionconfig.LoadEncryptionConfig(ctx, a, false, "test")
	if err != nil {
		t.Fatalf("kube-apiserver's loader refuses it: %v", err)
	}
	if _, ok := cfg.Transformers[schema.GroupResource{Resource: "secrets"}]; !ok {
		t.Errorf("no transformer for secrets: %v", cfg.Transformers)
	}
	first, _ := os.ReadFile(a)
	other, _ := os.ReadFile(b)
	if !strings.Contains(string(first), "secretbox:") || string(first) == string(other) {
		t.Errorf("want a secretbox key of its own per file:\n%s\n%s", first, other)
	}
	if err := EnsureEncryptionConfig(a); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(a); string(again) != string(first) {
		t.Error("EnsureEncryptionConfig rewrote an existing configuration")
	}
	if info, _ := os.Stat(a); info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", info.Mode().Perm())
	}
}

// TestEnsureEtcdMember: a member's serving and peer certificates name
// its address and chain to the shared etcd CA; a second call keeps them.
func TestEnsureEtcdMember(t *testing.T) {
	dir := t.TempDir()
	f, err := EnsureEtcdMember(dir, filepath.Join(dir, "cp-1"), []string{"172.18.0.21"})
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	for _, path := range []string{f.ServerCert, f.PeerCert} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := parseCert(data)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "172.18.0.21", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	before, _ := os.ReadFile(f.ServerCert)
	if _, err := EnsureEtcdMember(dir, filepath.Join(dir, "cp-1"), []string{"172.18.0.21"}); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(f.ServerCert); string(after) != string(before) {
		t.Error("a second call reissued the member's certificate")
	}
}
