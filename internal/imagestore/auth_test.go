package imagestore

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// TestKeychain: which entry of which secret answers for a repository.
func TestKeychain(t *testing.T) {
	secrets := [][]byte{
		[]byte(`{"auths":{
			"https://index.docker.io/v1/": {"auth": "aHViOmh1Yg=="},
			"registry.example.com:5000": {"username": "port", "password": "p"},
			"registry.example.com/team": {"username": "team", "password": "p"},
			"registry.example.com": {"username": "host", "password": "p"},
			"*.mirror.example.com": {"identitytoken": "id-token"},
			"tokens.example.com": {"registrytoken": "reg-token"}
		}}`),
		// The legacy .dockercfg form: the map alone.
		[]byte(`{"second.example.com": {"username": "second", "password": "p"}}`),
	}
	kc, err := newKeychain(secrets)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		repo string
		want authn.AuthConfig
	}{
		{"nginx", authn.AuthConfig{Username: "hub", Password: "hub"}},
		{"docker.io/library/nginx", authn.AuthConfig{Username: "hub", Password: "hub"}},
		{"registry.example.com:5000/any", authn.AuthConfig{Username: "port", Password: "p"}},
		{"registry.example.com/team/app", authn.AuthConfig{Username: "team", Password: "p"}},
		{"registry.example.com/teamx/app", authn.AuthConfig{Username: "host", Password: "p"}},
		{"registry.example.com/other", authn.AuthConfig{Username: "host", Password: "p"}},
		{"eu.mirror.example.com/x", authn.AuthConfig{IdentityToken: "id-token"}},
		{"a.eu.mirror.example.com/x", authn.AuthConfig{}},
		{"tokens.example.com/x", authn.AuthConfig{RegistryToken: "reg-token"}},
		{"second.example.com/x", authn.AuthConfig{Username: "second", Password: "p"}},
		{"unknown.example.com/x", authn.AuthConfig{}},
	} {
		t.Run(tc.repo, func(t *testing.T) {
			repo, err := name.NewRepository(tc.repo)
			if err != nil {
				t.Fatal(err)
			}
			a, err := kc.Resolve(repo)
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.Authorization()
			if err != nil {
				t.Fatal(err)
			}
			got.Auth = "" // derived from username and password
			if *got != tc.want {
				t.Errorf("got %+v, want %+v", *got, tc.want)
			}
		})
	}
}

func TestKeychainBadSecret(t *testing.T) {
	if _, err := newKeychain([][]byte{[]byte(`{"auths": {"x": {"auth": "%%%"}}}`)}); err == nil {
		t.Error("a secret with an undecodable auth was accepted")
	}
	if _, err := newKeychain([][]byte{[]byte(`not json`)}); err == nil {
		t.Error("a secret that is not JSON was accepted")
	}
}
