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

// defaultPath is the PATH of a container whose image sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// baseEnv is what a container of a built-in image starts with before the
// pod's variables: what an image's environment typically holds.
var baseEnv = []corev1.EnvVar{
	{Name: "PATH", Value: defaultPath},
	{Name: "HOME", Value: "/root"},
}

// ContainerEnv assembles a container's environment as kubelet does:
// service variables, then envFrom, then env (which may refer to earlier
// variables with $(NAME)), plus HOSTNAME. A missing object that is not
// optional is an error (CreateContainerConfigError).
func ContainerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container, svcEnv []corev1.EnvVar, src EnvSource) ([]string, error) {
	return containerEnv(ctx, pod, c, baseEnv, svcEnv, src)
}

// containerEnv is ContainerEnv over base, the image's environment.
func containerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container, base, svcEnv []corev1.EnvVar, src EnvSource) ([]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, e := range base {
		set(e.Name, e.Value)
	}
	set("HOSTNAME", Hostname(pod))
	for _, e := range svcEnv {
		set(e.Name, e.Value)
	}
	for _, from := range c.EnvFrom {
		var ref dataRef
		switch {
		case from.ConfigMapRef != nil:
			ref = dataRef{"configmap", from.ConfigMapRef.Name, from.ConfigMapRef.Optional}
		case from.SecretRef != nil:
			ref = dataRef{"secret", from.SecretRef.Name, from.SecretRef.Optional}
		default:
			continue
		}
		data, err := ref.read(ctx, src, pod.Namespace)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			set(from.Prefix+k, v)
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
		r := vf.ConfigMapKeyRef
		return dataRef{"configmap", r.Name, r.Optional}.value(ctx, src, pod.Namespace, e.Name, r.Key)
	case vf.SecretKeyRef != nil:
		r := vf.SecretKeyRef
		return dataRef{"secret", r.Name, r.Optional}.value(ctx, src, pod.Namespace, e.Name, r.Key)
	case vf.ResourceFieldRef != nil:
		return "0", false, nil // svcnet sets no resource limits
	}
	return "", true, nil
}

// dataRef names a ConfigMap or a Secret of the pod's namespace that
// variables come from.
type dataRef struct {
	kind     string // "configmap" or "secret"
	name     string
	optional *bool
}

// read returns the object's data, a Secret's as strings; none, with no
// error, when the object is missing and optional.
func (r dataRef) read(ctx context.Context, src EnvSource, ns string) (data map[string]string, err error) {
	if r.kind == "secret" {
		var sec *corev1.Secret
		if sec, err = src.Secret(ctx, ns, r.name); err == nil {
			data = make(map[string]string, len(sec.Data))
			for k, v := range sec.Data {
				data[k] = string(v)
			}
		}
	} else {
		var cm *corev1.ConfigMap
		if cm, err = src.ConfigMap(ctx, ns, r.name); err == nil {
			data = cm.Data
		}
	}
	if err != nil {
		if apierrors.IsNotFound(err) && ptr.Deref(r.optional, false) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s %q: %w", r.kind, r.name, err)
	}
	return data, nil
}

// value is variable env's value: the object's key. skip is true, with no
// error, when the object or the key is missing and optional.
func (r dataRef) value(ctx context.Context, src EnvSource, ns, env, key string) (v string, skip bool, err error) {
	data, err := r.read(ctx, src, ns)
	if err != nil {
		return "", false, fmt.Errorf("env %s: %w", env, err)
	}
	v, ok := data[key]
	if !ok {
		if ptr.Deref(r.optional, false) {
			return "", true, nil
		}
		return "", false, fmt.Errorf("env %s: %s %q has no key %q", env, r.kind, r.name, key)
	}
	return v, false, nil
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
