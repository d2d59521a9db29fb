package cluster

import (
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/pki"
)

// UserKubeconfig writes a kubeconfig for a user of the cluster: a client
// certificate signed by its CA with the user's name and groups, and
// nothing more — what the user may do is what RBAC bindings grant them
// (kubectl create rolebinding …). It returns the file's path.
func (s State) UserKubeconfig(user string, groups []string) (string, error) {
	if user == "" || strings.ContainsAny(user, "/\x00") {
		return "", fmt.Errorf("user name %q: give a name without slashes", user)
	}
	if strings.HasPrefix(user, "system:") {
		return "", fmt.Errorf("user name %q: system: names are the cluster's own identities", user)
	}
	for _, g := range groups {
		if g == "system:masters" || strings.HasPrefix(g, "system:") {
			return "", fmt.Errorf("group %q: system: groups are the cluster's own (the admin kubeconfig is the way to system:masters)", g)
		}
	}
	admin, err := clientcmd.LoadFromFile(s.Kubeconfig())
	if err != nil {
		return "", fmt.Errorf("the cluster's admin kubeconfig: %w", err)
	}
	ctx := admin.Contexts[admin.CurrentContext]
	if ctx == nil || admin.Clusters[ctx.Cluster] == nil {
		return "", fmt.Errorf("%s has no current cluster", s.Kubeconfig())
	}
	ca, err := pki.LoadCA(filepath.Join(s.APIServerDir(), "pki"))
	if err != nil {
		return "", fmt.Errorf("the cluster's CA: %w", err)
	}
	cred, err := ca.ClientCredentials(user, groups...)
	if err != nil {
		return "", err
	}
	path := s.path("users", user+".kubeconfig")
	if err := pki.WriteKubeconfig(path, pki.Kubeconfig("svcnet", admin.Clusters[ctx.Cluster].Server, ca.CertPEM, cred)); err != nil {
		return "", err
	}
	return path, nil
}
