package pods

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/node/volumes"
)

// EnvSource reads the objects env variables may come from.
type EnvSource interface {
	ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error)
	Secret(ctx context.Context, ns, name string) (*corev1.Secret, error)
}

// baseEnv is what a container starts with before the pod's variables:
// what an image's environment typically holds.
var baseEnv = []corev1.EnvVar{
	{Name: "PATH", Value: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	{Name: "HOME", Value: "/root"},
}

// ContainerEnv assembles a container's environment as kubelet does:
// service variables, then envFrom, then env (which may refer to earlier
// variables with $(NAME)), plus HOSTNAME. A missing object that is not
// optional is an error (CreateContainerConfigError).
func ContainerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container, svcEnv []corev1.EnvVar, src EnvSource) ([]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, e := range baseEnv {
		set(e.Name, e.Value)
	}
	set("HOSTNAME", Hostname(pod))
	for _, e := range svcEnv {
		set(e.Name, e.Value)
	}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, err := src.ConfigMap(ctx, pod.Namespace, from.ConfigMapRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && ptr.Deref(from.ConfigMapRef.Optional, false) {
					continue
				}
				return nil, fmt.Errorf("configmap %q: %w", from.ConfigMapRef.Name, err)
			}
			for k, v := range cm.Data {
				set(from.Prefix+k, v)
			}
		case from.SecretRef != nil:
			sec, err := src.Secret(ctx, pod.Namespace, from.SecretRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && ptr.Deref(from.SecretRef.Optional, false) {
					continue
				}
				return nil, fmt.Errorf("secret %q: %w", from.SecretRef.Name, err)
			}
			for k, v := range sec.Data {
				set(from.Prefix+k, string(v))
			}
		}
	}
	for _, e := range c.Env {
		v, skip, err := envValue(ctx, pod, e, vars, src)
		if err != nil {
			return nil, err
		}
		if !skip {
			set(e.Name, v)
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

func envValue(ctx context.Context, pod *corev1.Pod, e corev1.EnvVar, vars map[string]string, src EnvSource) (string, bool, error) {
	if e.ValueFrom == nil {
		return Expand(e.Value, vars), false, nil
	}
	vf := e.ValueFrom
	switch {
	case vf.FieldRef != nil:
		v, err := fieldValue(pod, vf.FieldRef.FieldPath)
		return v, false, err
	case vf.ConfigMapKeyRef != nil:
		ref := vf.ConfigMapKeyRef
		cm, err := src.ConfigMap(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && ptr.Deref(ref.Optional, false) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("env %s: configmap %q: %w", e.Name, ref.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if ptr.Deref(ref.Optional, false) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("env %s: configmap %q has no key %q", e.Name, ref.Name, ref.Key)
		}
		return v, false, nil
	case vf.SecretKeyRef != nil:
		ref := vf.SecretKeyRef
		sec, err := src.Secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && ptr.Deref(ref.Optional, false) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("env %s: secret %q: %w", e.Name, ref.Name, err)
		}
		v, ok := sec.Data[ref.Key]
		if !ok {
			if ptr.Deref(ref.Optional, false) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("env %s: secret %q has no key %q", e.Name, ref.Name, ref.Key)
		}
		return string(v), false, nil
	case vf.ResourceFieldRef != nil:
		return "0", false, nil // svcnet sets no resource limits
	}
	return "", true, nil
}

// fieldValue resolves a downward-API field path: the pod's status fields
// here (environment only), its metadata and spec as in volumes.
func fieldValue(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.podIPs":
		var ips []string
		for _, p := range pod.Status.PodIPs {
			ips = append(ips, p.IP)
		}
		return strings.Join(ips, ","), nil
	}
	return volumes.FieldValue(pod, path)
}
