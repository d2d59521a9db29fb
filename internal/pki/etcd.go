package pki

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
)

// EtcdFiles are the certificates of etcd's mutual TLS, laid out as kubeadm
// lays them out: a CA of etcd's own in pki/etcd/, the member's serving and
// peer certificates beside it, and the API server's client certificate in
// pki/.
type EtcdFiles struct {
	CA, ServerCert, ServerKey, PeerCert, PeerKey, ClientCert, ClientKey string
}

// EtcdClientUser is the identity in the API server's etcd client
// certificate (kubeadm's name).
const EtcdClientUser = "kube-apiserver-etcd-client"

// EnsureEtcd creates, on first use, the etcd CA and certificates under
// dir (the API server's pki directory); later calls keep what is valid.
// The member serves only loopback, so its certificates name only that.
func EnsureEtcd(dir string) (EtcdFiles, error) {
	etcdDir := filepath.Join(dir, "etcd")
	f := EtcdFiles{
		CA:         filepath.Join(etcdDir, CACertFile),
		ServerCert: filepath.Join(etcdDir, "server.crt"), ServerKey: filepath.Join(etcdDir, "server.key"),
		PeerCert: filepath.Join(etcdDir, "peer.crt"), PeerKey: filepath.Join(etcdDir, "peer.key"),
		ClientCert: filepath.Join(dir, "apiserver-etcd-client.crt"), ClientKey: filepath.Join(dir, "apiserver-etcd-client.key"),
	}
	ca, err := ensureCA(etcdDir, "etcd-ca")
	if err != nil {
		return f, fmt.Errorf("etcd CA: %w", err)
	}
	// Directories made before this layout may be wider than the owner's.
	for _, d := range []string{dir, etcdDir} {
		if err := os.Chmod(d, 0o700); err != nil {
			return f, err
		}
	}
	hosts := []string{"127.0.0.1", "localhost", "::1"}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, c := range []struct {
		cert, key, cn string
		hosts         []string
		usage         []x509.ExtKeyUsage
	}{
		{f.ServerCert, f.ServerKey, "svcnet-etcd", hosts, both},
		{f.PeerCert, f.PeerKey, "svcnet-etcd-peer", hosts, both},
		{f.ClientCert, f.ClientKey, EtcdClientUser, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
	} {
		if err := ca.ensureCert(c.cert, c.key, c.cn, nil, c.hosts, c.usage); err != nil {
			return f, fmt.Errorf("etcd certificate %s: %w", c.cn, err)
		}
	}
	return f, nil
}

// EnsureEtcdMember creates, on first use, the serving and peer
// certificates of one member of an etcd cluster in memberDir, issued by
// the etcd CA under dir (made by EnsureEtcd), naming hosts (the member's
// addresses). The returned files are that member's, with the shared CA
// and the API server's client certificate.
func EnsureEtcdMember(dir, memberDir string, hosts []string) (EtcdFiles, error) {
	shared, err := EnsureEtcd(dir)
	if err != nil {
		return shared, err
	}
	ca, err := ensureCA(filepath.Join(dir, "etcd"), "etcd-ca")
	if err != nil {
		return shared, err
	}
	if err := os.MkdirAll(memberDir, 0o700); err != nil {
		return shared, err
	}
	f := shared
	f.ServerCert, f.ServerKey = filepath.Join(memberDir, "server.crt"), filepath.Join(memberDir, "server.key")
	f.PeerCert, f.PeerKey = filepath.Join(memberDir, "peer.crt"), filepath.Join(memberDir, "peer.key")
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	hosts = append([]string{"127.0.0.1", "localhost"}, hosts...)
	for _, c := range []struct{ cert, key, cn string }{
		{f.ServerCert, f.ServerKey, "svcnet-etcd"}, {f.PeerCert, f.PeerKey, "svcnet-etcd-peer"},
	} {
		if err := ca.ensureCert(c.cert, c.key, c.cn, nil, hosts, both); err != nil {
			return f, fmt.Errorf("etcd certificate %s: %w", c.cn, err)
		}
	}
	return f, nil
}
