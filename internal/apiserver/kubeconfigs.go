package apiserver

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/svcnet/svcnet/internal/pki"
)

// KubeconfigDir is where the server writes a kubeconfig per built-in
// identity (admin, viewer, controller-manager, scheduler, proxy, dns,
// ingress), under its data directory.
const KubeconfigDir = "kubeconfigs"

// writeKubeconfigs writes the admin kubeconfig (client certificate) where
// asked and one kubeconfig per built-in identity in the data directory.
func (s *Server) writeKubeconfigs(ca *pki.CA, tokenFile string) error {
	dir := filepath.Join(s.opts.DataDir, KubeconfigDir)
	// Credentials: the owner's only, also when an older version made it.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	certIdentities := []struct {
		file, user string
		groups     []string
	}{
		{"admin", AdminUser, []string{AdminGroup}},
		{"controller-manager", ControllerManagerUser, nil},
		{"scheduler", SchedulerUser, nil},
		{"proxy", ProxyUser, []string{ProxyGroup}},
		{"dns", DNSUser, nil},
		{"ingress", IngressUser, nil},
	}
	for _, id := range certIdentities {
		cred, err := ca.ClientCredentials(id.user, id.groups...)
		if err != nil {
			return err
		}
		if err := pki.WriteKubeconfig(filepath.Join(dir, id.file+".kubeconfig"), pki.Kubeconfig("svcnet", s.URL, ca.CertPEM, cred)); err != nil {
			return err
		}
	}
	tokens, err := ensureTokenFile(tokenFile)
	if err != nil {
		return err
	}
	if tok, ok := tokens[ViewerUser]; ok {
		cfg := pki.Kubeconfig("svcnet", s.URL, ca.CertPEM, pki.Credentials{Token: tok})
		if err := pki.WriteKubeconfig(filepath.Join(dir, "viewer.kubeconfig"), cfg); err != nil {
			return err
		}
	}
	s.AdminKubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if s.opts.WriteKubeconfig != "" {
		cred, err := ca.ClientCredentials(AdminUser, AdminGroup)
		if err != nil {
			return err
		}
		if err := pki.WriteKubeconfig(s.opts.WriteKubeconfig, pki.Kubeconfig("svcnet", s.URL, ca.CertPEM, cred)); err != nil {
			return fmt.Errorf("--write-kubeconfig: %w", err)
		}
		s.AdminKubeconfig = s.opts.WriteKubeconfig
	}
	return nil
}
