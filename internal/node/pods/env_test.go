package pods

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// objects is an EnvSource of one ConfigMap "cm" and one Secret "sec".
type objects struct{}

func (objects) ConfigMap(_ context.Context, _, name string) (*corev1.ConfigMap, error) {
	if name != "cm" {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
	}
	return &corev1.ConfigMap{Data: map[string]string{"A": "from-cm"}}, nil
}

func (objects) Secret(_ context.Context, _, name string) (*corev1.Secret, error) {
	if name != "sec" {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	return &corev1.Secret{Data: map[string][]byte{"B": []byte("from-secret")}}, nil
}

func TestContainerEnvSources(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"}}
	cmKey := func(name, key string, optional bool) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: ptr.To(optional)}}
	}
	secretKey := func(name, key string, optional bool) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: ptr.To(optional)}}
	}
	c := &corev1.Container{
		EnvFrom: []corev1.EnvFromSource{
			{Prefix: "CM_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
			{Prefix: "SEC_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Optional: ptr.To(true)}},
		},
		Env: []corev1.EnvVar{
			{Name: "X", ValueFrom: cmKey("cm", "A", false)},
			{Name: "Y", ValueFrom: secretKey("sec", "B", false)},
			{Name: "NOKEY", ValueFrom: secretKey("sec", "nope", true)},
			{Name: "NOOBJ", ValueFrom: cmKey("gone", "A", true)},
		},
	}
	env, err := ContainerEnv(context.Background(), pod, c, nil, objects{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CM_A=from-cm", "SEC_B=from-secret", "X=from-cm", "Y=from-secret"} {
		if !slices.Contains(env, want) {
			t.Errorf("no %s in %q", want, env)
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "NOKEY=") || strings.HasPrefix(kv, "NOOBJ=") {
			t.Errorf("optional missing value set: %s", kv)
		}
	}

	for _, tc := range []struct {
		v    corev1.EnvVar
		want string
	}{
		{corev1.EnvVar{Name: "M", ValueFrom: secretKey("sec", "nope", false)}, `env M: secret "sec" has no key "nope"`},
		{corev1.EnvVar{Name: "N", ValueFrom: cmKey("gone", "A", false)}, `env N: configmap "gone": configmaps "gone" not found`},
	} {
		_, err := ContainerEnv(context.Background(), pod, &corev1.Container{Env: []corev1.EnvVar{tc.v}}, nil, objects{})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.v.Name, err, tc.want)
		}
	}
	from := &corev1.Container{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}}}}}
	if _, err := ContainerEnv(context.Background(), pod, from, nil, objects{}); err == nil || err.Error() != `configmap "gone": configmaps "gone" not found` {
		t.Errorf("envFrom of a missing configmap: %v", err)
	}
}
