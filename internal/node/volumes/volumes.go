// Package volumes makes the contents of a pod's volumes that come from
// the API — projected (ServiceAccount token, ConfigMap, Secret, downward
// API), configMap, secret and downwardAPI volumes — and writes them into
// the directory the node mounts in the containers, as kubelet's volume
// plugins do. Contents is pure given its Source; tokens are refreshed
// before they expire.
package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Source reads what the volumes show.
type Source interface {
	ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	// Token asks for a token of the ServiceAccount (TokenRequest).
	Token(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

// File is one file of a volume.
type File struct {
	Path string // relative to the volume's directory
	Data []byte
	Mode os.FileMode
}

// Managed reports whether v is a volume this package fills.
func Managed(v *corev1.Volume) bool {
	return v.Projected != nil || v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil
}

const defaultMode = 0o644

// Contents computes the files of volume v of pod, and when they must be
// computed again (a token's refresh time; zero when never).
func Contents(ctx context.Context, src Source, pod *corev1.Pod, v *corev1.Volume, now time.Time) ([]File, time.Time, error) {
	var files []File
	var refresh time.Time
	mode := func(item *int32, def *int32) os.FileMode {
		switch {
		case item != nil:
			return os.FileMode(*item)
		case def != nil:
			return os.FileMode(*def)
		}
		return defaultMode
	}
	switch {
	case v.ConfigMap != nil:
		out, err := configMapFiles(ctx, src, pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, v.ConfigMap.DefaultMode, mode)
		return out, refresh, err
	case v.Secret != nil:
		out, err := secretFiles(ctx, src, pod.Namespace, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, v.Secret.DefaultMode, mode)
		return out, refresh, err
	case v.DownwardAPI != nil:
		out, err := downwardFiles(pod, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode, mode)
		return out, refresh, err
	case v.Projected != nil:
		def := v.Projected.DefaultMode
		for _, s := range v.Projected.Sources {
			var out []File
			var err error
			switch {
			case s.ConfigMap != nil:
				out, err = configMapFiles(ctx, src, pod.Namespace, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, def, mode)
			case s.Secret != nil:
				out, err = secretFiles(ctx, src, pod.Namespace, s.Secret.Name, s.Secret.Items, s.Secret.Optional, def, mode)
			case s.DownwardAPI != nil:
				out, err = downwardFiles(pod, s.DownwardAPI.Items, def, mode)
			case s.ServiceAccountToken != nil:
				var f File
				var at time.Time
				f, at, err = tokenFile(ctx, src, pod, s.ServiceAccountToken, mode(nil, def), now)
				out = []File{f}
				if refresh.IsZero() || at.Before(refresh) {
					refresh = at
				}
			default:
				err = fmt.Errorf("volume %q: a projection of a kind svcnet's node agent does not support (clusterTrustBundle, podCertificate)", v.Name)
			}
			if err != nil {
				return nil, time.Time{}, err
			}
			files = append(files, out...)
		}
		return files, refresh, nil
	}
	return nil, time.Time{}, fmt.Errorf("volume %q is not made from the API", v.Name)
}

type modeFunc func(item, def *int32) os.FileMode

func keyFiles(data map[string][]byte, items []corev1.KeyToPath, def *int32, mode modeFunc, what string) ([]File, error) {
	var out []File
	if len(items) == 0 {
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, File{Path: k, Data: data[k], Mode: mode(nil, def)})
		}
		return out, nil
	}
	for _, it := range items {
		d, ok := data[it.Key]
		if !ok {
			return nil, fmt.Errorf("%s has no key %q", what, it.Key)
		}
		out = append(out, File{Path: it.Path, Data: d, Mode: mode(it.Mode, def)})
	}
	return out, nil
}

func configMapFiles(ctx context.Context, src Source, ns, name string, items []corev1.KeyToPath, optional *bool, def *int32, mode modeFunc) ([]File, error) {
	cm, err := src.ConfigMap(ctx, ns, name)
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("configmap %q: %w", name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keyFiles(data, items, def, mode, fmt.Sprintf("configmap %q", name))
}

func secretFiles(ctx context.Context, src Source, ns, name string, items []corev1.KeyToPath, optional *bool, def *int32, mode modeFunc) ([]File, error) {
	sec, err := src.Secret(ctx, ns, name)
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	return keyFiles(sec.Data, items, def, mode, fmt.Sprintf("secret %q", name))
}

// downwardFiles are the pod's own fields (resource limits are not
// offered: svcnet's node agent sets none).
func downwardFiles(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, def *int32, mode modeFunc) ([]File, error) {
	var out []File
	for _, it := range items {
		if it.FieldRef == nil {
			return nil, fmt.Errorf("downward API file %q: only fieldRef is supported by svcnet's node agent", it.Path)
		}
		v, err := FieldValue(pod, it.FieldRef.FieldPath)
		if err != nil {
			return nil, fmt.Errorf("downward API file %q: %w", it.Path, err)
		}
		out = append(out, File{Path: it.Path, Data: []byte(v), Mode: mode(it.Mode, def)})
	}
	return out, nil
}

// FieldValue is a pod field as the downward API shows it.
func FieldValue(pod *corev1.Pod, fieldPath string) (string, error) {
	if k, ok := subscript(fieldPath, "metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	if k, ok := subscript(fieldPath, "metadata.annotations"); ok {
		return pod.Annotations[k], nil
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", fieldPath)
}

// subscript parses "metadata.labels['key']".
func subscript(fieldPath, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(fieldPath, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

// formatMap is key="value" lines, sorted, as kubelet writes them.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	return b.String()
}

// tokenFile asks for a token bound to the pod; it is to be refreshed
// when 80% of its life is over, or after 24 hours, as kubelet does.
func tokenFile(ctx context.Context, src Source, pod *corev1.Pod, p *corev1.ServiceAccountTokenProjection, mode os.FileMode, now time.Time) (File, time.Time, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: p.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if p.Audience != "" {
		req.Spec.Audiences = []string{p.Audience}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	out, err := src.Token(ctx, pod.Namespace, sa, req)
	if err != nil {
		return File{}, time.Time{}, fmt.Errorf("token of ServiceAccount %q: %w", sa, err)
	}
	life := out.Status.ExpirationTimestamp.Sub(now)
	refresh := now.Add(life * 8 / 10)
	if life > 24*time.Hour {
		refresh = now.Add(24 * time.Hour)
	}
	return File{Path: p.Path, Data: []byte(out.Status.Token), Mode: mode}, refresh, nil
}

// Write makes dir hold exactly files: each one replaced whole (a reader
// never sees half a token), the ones no longer there removed.
func Write(dir string, files []File) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, f := range files {
		clean := path.Clean(f.Path)
		if f.Path == "" || path.IsAbs(f.Path) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("file path %q must be relative and stay in the volume", f.Path)
		}
		p := filepath.Join(dir, filepath.FromSlash(clean))
		keep[p] = true
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		tmp := p + ".svcnet-tmp"
		if err := os.WriteFile(tmp, f.Data, f.Mode.Perm()); err != nil {
			return err
		}
		if err := os.Chmod(tmp, f.Mode.Perm()); err != nil { // past the umask
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			return err
		}
	}
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || keep[p] {
			return err
		}
		if rmErr := os.Remove(p); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			return rmErr
		}
		return nil
	})
}
