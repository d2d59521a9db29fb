package volumes

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

type fakeSource struct {
	now  time.Time
	reqs []*authenticationv1.TokenRequest
}

func (f *fakeSource) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	if name == "kube-root-ca.crt" {
		return &corev1.ConfigMap{Data: map[string]string{"ca.crt": "CA of " + ns}}, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (f *fakeSource) Secret(_ context.Context, _, name string) (*corev1.Secret, error) {
	if name == "creds" {
		return &corev1.Secret{Data: map[string][]byte{"user": []byte("u"), "pass": []byte("p")}}, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (f *fakeSource) Token(_ context.Context, ns, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	f.reqs = append(f.reqs, req)
	out := req.DeepCopy()
	out.Status.Token = "token-of-" + ns + "/" + sa
	out.Status.ExpirationTimestamp = metav1.NewTime(f.now.Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second))
	return out, nil
}

func TestContents(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", UID: "pod-uid", Labels: map[string]string{"b": "2", "a": "1"}},
		Spec: corev1.PodSpec{ServiceAccountName: "builder"}}
	projected := corev1.Volume{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](0o644),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3600)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
				{Path: "a", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['a']"}, Mode: ptr.To[int32](0o600)},
			}}},
		}}}}
	for _, tc := range []struct {
		name    string
		vol     corev1.Volume
		want    map[string]string
		refresh time.Duration
		wantErr bool
	}{
		{"ServiceAccount projection", projected, map[string]string{"token": "token-of-team/builder", "ca.crt": "CA of team",
			"namespace": "team", "labels": "a=\"1\"\nb=\"2\"", "a": "1"}, 48 * time.Minute, false},
		{"secret volume, all keys", corev1.Volume{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
			map[string]string{"user": "u", "pass": "p"}, 0, false},
		{"missing optional configmap", corev1.Volume{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: ptr.To(true)}}}, map[string]string{}, 0, false},
		{"missing configmap", corev1.Volume{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}}}}, nil, 0, true},
		{"missing key", corev1.Volume{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds",
			Items: []corev1.KeyToPath{{Key: "nope", Path: "x"}}}}}, nil, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &fakeSource{now: now}
			files, refresh, err := Contents(context.Background(), src, pod, &tc.vol, now)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err != nil {
				return
			}
			got := map[string]string{}
			for _, f := range files {
				got[f.Path] = string(f.Data)
				if f.Path == "a" && f.Mode != 0o600 || f.Path != "a" && f.Mode != 0o644 {
					t.Errorf("%s: mode %v", f.Path, f.Mode)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("files %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if tc.refresh == 0 && !refresh.IsZero() || tc.refresh != 0 && !refresh.Equal(now.Add(tc.refresh)) {
				t.Errorf("refresh at %v, want now+%v", refresh, tc.refresh)
			}
			if len(src.reqs) > 0 {
				ref := src.reqs[0].Spec.BoundObjectRef
				if ref == nil || ref.Kind != "Pod" || ref.Name != "web" || ref.UID != "pod-uid" {
					t.Errorf("token not bound to the pod: %+v", ref)
				}
			}
		})
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, []File{{Path: "token", Data: []byte("one"), Mode: 0o644}, {Path: "sub/old", Data: []byte("x"), Mode: 0o600}}); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, []File{{Path: "token", Data: []byte("two"), Mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "token")); string(b) != "two" {
		t.Errorf("token = %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub/old")); !os.IsNotExist(err) {
		t.Error("a file no longer in the volume stays")
	}
	for _, bad := range []string{"../escape", "/abs", ""} {
		if err := Write(dir, []File{{Path: bad, Data: []byte("x")}}); err == nil {
			t.Errorf("path %q accepted", bad)
		}
	}
}
