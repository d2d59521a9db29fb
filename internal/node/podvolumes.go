package node

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/node/volumes"
)

// apiSource reads volume contents through the node's API client.
type apiSource struct{ client kubernetes.Interface }

func (s apiSource) ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return s.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

func (s apiSource) Secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return s.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

func (s apiSource) Token(ctx context.Context, ns, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return s.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, req, metav1.CreateOptions{})
}

// volumeRefresh is how often ConfigMap and Secret volumes are read again
// (kubelet's sync period), so that a change reaches running pods.
const volumeRefresh = time.Minute

// apiVolumes is what a worker knows of its pod's API-backed volumes.
type apiVolumes struct {
	written bool      // every volume was written once
	next    time.Time // when to write them again (zero: never)
}

// syncVolumes writes the pod's API-backed volumes when they are due. A
// first write that fails keeps the containers from starting (kubelet's
// FailedMount); a refresh that fails leaves the old files and retries.
func (w *podWorker) syncVolumes(ctx context.Context) error {
	now := time.Now()
	if w.vols.written && (w.vols.next.IsZero() || now.Before(w.vols.next)) {
		return nil
	}
	var next time.Time
	soonest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for i := range w.pod.Spec.Volumes {
		v := &w.pod.Spec.Volumes[i]
		if !volumes.Managed(v) {
			continue
		}
		files, at, err := volumes.Contents(ctx, w.a.volumeSource, w.pod, v, now)
		if err == nil {
			err = volumes.Write(filepath.Join(w.dir, "volumes", v.Name), files)
		}
		if err != nil {
			err = fmt.Errorf("MountVolume.SetUp failed for volume %q: %w", v.Name, err)
			w.a.event(w.pod, corev1.EventTypeWarning, "FailedMount", "%s", err)
			if w.vols.written {
				w.vols.next = now.Add(10 * time.Second)
				w.log().Warn("volume refresh failed", "err", err)
				return nil
			}
			return err
		}
		soonest(at)
		if fromObjects(v) {
			soonest(now.Add(volumeRefresh))
		}
	}
	w.vols = apiVolumes{written: true, next: next}
	return nil
}

// fromObjects reports whether a volume shows ConfigMaps or Secrets.
func fromObjects(v *corev1.Volume) bool {
	if v.ConfigMap != nil || v.Secret != nil {
		return true
	}
	if v.Projected != nil {
		for _, s := range v.Projected.Sources {
			if s.ConfigMap != nil || s.Secret != nil {
				return true
			}
		}
	}
	return false
}

// volumesWake is how long until the volumes are due, capped by d.
func (w *podWorker) volumesWake(d time.Duration) time.Duration {
	if w.vols.next.IsZero() {
		return d
	}
	return min(d, max(time.Until(w.vols.next), 10*time.Millisecond))
}
