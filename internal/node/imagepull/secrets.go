package imagepull

import (
	"context"
	"encoding/json"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// SecretSource reads what a pod's pull secrets are made of.
type SecretSource interface {
	Secret(ctx context.Context, ns, name string) (*corev1.Secret, error)
	ServiceAccount(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error)
}

// PullSecrets returns the docker config JSON of the pod's
// imagePullSecrets, then of its ServiceAccount's, in order, as kubelet
// gathers them (the ServiceAccount admission plugin copies the latter
// into the pod in Kubernetes; svcnet reads them here too, so a pod
// created before the account got its secrets pulls with them). A
// missing secret or account is skipped, as kubelet skips it; a secret
// of another type too.
func PullSecrets(ctx context.Context, src SecretSource, pod *corev1.Pod) [][]byte {
	names := slices.Clone(pod.Spec.ImagePullSecrets)
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	if acct, err := src.ServiceAccount(ctx, pod.Namespace, sa); err == nil {
		names = append(names, acct.ImagePullSecrets...)
	}
	var out [][]byte
	seen := map[string]bool{}
	for _, ref := range names {
		if ref.Name == "" || seen[ref.Name] {
			continue
		}
		seen[ref.Name] = true
		s, err := src.Secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			continue
		}
		if b, ok := DockerConfig(s); ok {
			out = append(out, b)
		}
	}
	return out
}

// DockerConfig is a pull secret's docker config JSON: the
// .dockerconfigjson of a kubernetes.io/dockerconfigjson secret, or the
// .dockercfg of a kubernetes.io/dockercfg one (the "auths" map alone,
// which the store reads too).
func DockerConfig(s *corev1.Secret) ([]byte, bool) {
	switch s.Type {
	case corev1.SecretTypeDockerConfigJson:
		b, ok := s.Data[corev1.DockerConfigJsonKey]
		return b, ok && json.Valid(b)
	case corev1.SecretTypeDockercfg:
		b, ok := s.Data[corev1.DockerConfigKey]
		return b, ok && json.Valid(b)
	}
	return nil, false
}
