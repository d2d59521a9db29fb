package imagestore

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
)

// dockerHubHosts are the names under which a docker config JSON may list
// credentials for Docker Hub; the name package calls it index.docker.io.
var dockerHubHosts = []string{"index.docker.io", "docker.io", "registry-1.docker.io"}

// credential is one entry of a docker config JSON's "auths".
type credential struct {
	host   string // may hold a glob, as "*.example.com"
	prefix string // a repository path prefix, "" for the whole host
	config authn.AuthConfig
}

// keychain answers credentials from the docker config JSON of Kubernetes
// imagePullSecrets, as the kubelet reads them: an entry's key is a host
// (with an optional scheme, port, path prefix and "*" globs per label),
// the most specific matching entry of the first secret with a match wins.
type keychain struct {
	secrets [][]credential
}

// newKeychain parses the secrets' .dockerconfigjson contents (the legacy
// .dockercfg form, the "auths" map alone, is accepted too).
func newKeychain(secrets [][]byte) (*keychain, error) {
	kc := &keychain{}
	for i, s := range secrets {
		var doc struct {
			Auths map[string]authn.AuthConfig `json:"auths"`
		}
		if err := json.Unmarshal(s, &doc); err != nil {
			return nil, fmt.Errorf("pull secret %d: %w", i, err)
		}
		if doc.Auths == nil {
			if err := json.Unmarshal(s, &doc.Auths); err != nil {
				return nil, fmt.Errorf("pull secret %d: %w", i, err)
			}
		}
		var creds []credential
		for key, cfg := range doc.Auths {
			host, prefix := splitKey(key)
			creds = append(creds, credential{host: host, prefix: prefix, config: cfg})
		}
		kc.secrets = append(kc.secrets, creds)
	}
	return kc, nil
}

// splitKey turns "https://registry.example.com:5000/team/" into its host
// and repository prefix. Docker Hub's historical key
// "https://index.docker.io/v1/" means the whole host.
func splitKey(key string) (host, prefix string) {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	host, prefix, _ = strings.Cut(key, "/")
	prefix = strings.Trim(prefix, "/")
	if prefix == "v1" || prefix == "v2" {
		prefix = ""
	}
	return strings.ToLower(host), prefix
}

// Resolve implements authn.Keychain.
func (kc *keychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	host := strings.ToLower(target.RegistryStr())
	repo := strings.TrimPrefix(target.String(), target.RegistryStr()+"/")
	if repo == target.String() {
		repo = "" // the target is a registry
	}
	for _, creds := range kc.secrets {
		best := -1
		for i, c := range creds {
			if !hostMatches(c.host, host) || !prefixMatches(c.prefix, repo) {
				continue
			}
			if best < 0 || len(c.host)+len(c.prefix) > len(creds[best].host)+len(creds[best].prefix) {
				best = i
			}
		}
		if best >= 0 {
			return authn.FromConfig(creds[best].config), nil
		}
	}
	return authn.Anonymous, nil
}

// hostMatches compares a key's host with a registry's, label by label
// with globs, the port exactly; Docker Hub's names are one host.
func hostMatches(pattern, host string) bool {
	if isDockerHub(pattern) && isDockerHub(host) {
		return true
	}
	pHost, pPort, _ := strings.Cut(pattern, ":")
	hHost, hPort, _ := strings.Cut(host, ":")
	if pPort != hPort {
		return false
	}
	pl, hl := strings.Split(pHost, "."), strings.Split(hHost, ".")
	if len(pl) != len(hl) {
		return false
	}
	for i := range pl {
		if ok, err := path.Match(pl[i], hl[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func prefixMatches(prefix, repo string) bool {
	return prefix == "" || repo == prefix || strings.HasPrefix(repo, prefix+"/")
}

func isDockerHub(host string) bool {
	for _, h := range dockerHubHosts {
		if host == h {
			return true
		}
	}
	return false
}
