package imagepull

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type objects struct {
	secrets  map[string]*corev1.Secret
	accounts map[string]*corev1.ServiceAccount
}

var errMissing = errors.New("not found")

func (o objects) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	if s, ok := o.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, errMissing
}

func (o objects) ServiceAccount(_ context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	if a, ok := o.accounts[ns+"/"+name]; ok {
		return a, nil
	}
	return nil, errMissing
}

func TestPullSecrets(t *testing.T) {
	cfg := func(s string) []byte { return []byte(`{"auths":{"` + s + `":{}}}`) }
	src := objects{
		secrets: map[string]*corev1.Secret{
			"ns/pod-secret": {Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: cfg("pod")}},
			"ns/legacy":     {Type: corev1.SecretTypeDockercfg, Data: map[string][]byte{corev1.DockerConfigKey: []byte(`{"legacy":{}}`)}},
			"ns/opaque":     {Type: corev1.SecretTypeOpaque, Data: map[string][]byte{corev1.DockerConfigJsonKey: cfg("opaque")}},
			"ns/broken":     {Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte("{")}},
			"ns/sa-secret":  {Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: cfg("sa")}},
			"other/sa-secret": {Type: corev1.SecretTypeDockerConfigJson,
				Data: map[string][]byte{corev1.DockerConfigJsonKey: cfg("other namespace")}},
		},
		accounts: map[string]*corev1.ServiceAccount{
			"ns/default": {ImagePullSecrets: []corev1.LocalObjectReference{{Name: "sa-secret"}}},
			"ns/builder": {ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pod-secret"}, {Name: "missing"}}},
		},
	}
	refs := func(names ...string) []corev1.LocalObjectReference {
		var out []corev1.LocalObjectReference
		for _, n := range names {
			out = append(out, corev1.LocalObjectReference{Name: n})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		sa      string
		secrets []corev1.LocalObjectReference
		want    []string
	}{
		{"the pod's, then the default account's", "", refs("pod-secret", "legacy"), []string{string(cfg("pod")), `{"legacy":{}}`, string(cfg("sa"))}},
		{"other types, broken and missing ones skipped", "", refs("opaque", "broken", "missing"), []string{string(cfg("sa"))}},
		{"a secret named twice counts once", "builder", refs("pod-secret"), []string{string(cfg("pod"))}},
		{"an account that is not there", "ghost", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"},
				Spec: corev1.PodSpec{ServiceAccountName: tc.sa, ImagePullSecrets: tc.secrets}}
			got := PullSecrets(context.Background(), src, pod)
			if len(got) != len(tc.want) {
				t.Fatalf("%d secrets %q, want %q", len(got), got, tc.want)
			}
			for i := range got {
				if string(got[i]) != tc.want[i] {
					t.Errorf("secret %d: %s, want %s", i, got[i], tc.want[i])
				}
			}
		})
	}
}
