package pki

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Credentials identify a user to the API server: a client certificate, or
// a bearer token.
type Credentials struct {
	CertPEM, KeyPEM []byte
	Token           string
}

// ClientCredentials issues a client certificate for user in groups.
func (ca *CA) ClientCredentials(user string, groups ...string) (Credentials, error) {
	cert, key, err := ca.Issue(user, groups, nil, true)
	return Credentials{CertPEM: cert, KeyPEM: key}, err
}

// Kubeconfig builds a kubeconfig for server (https://host:port) whose
// context is named name.
func Kubeconfig(name, server string, caPEM []byte, cred Credentials) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cred.CertPEM,
		ClientKeyData:         cred.KeyPEM,
		Token:                 cred.Token,
	}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: "default"}
	cfg.CurrentContext = name
	return cfg
}

// WriteKubeconfig writes cfg to path with owner-only permissions.
func WriteKubeconfig(path string, cfg *clientcmdapi.Config) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return writeFile(path, data)
}
