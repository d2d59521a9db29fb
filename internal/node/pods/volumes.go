package pods

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/node/volumes"
)

// volumeRefresh is how often ConfigMap and Secret volumes are read again
// (kubelet's sync period), so that a change reaches running pods.
const volumeRefresh = time.Minute

// apiVolumes is what a pod knows of its pod's API-backed volumes.
type apiVolumes struct {
	written bool      // every volume was written once
	next    time.Time // when to write them again (zero: never)
}

// syncVolumes writes the pod's API-backed volumes when they are due. A
// first write that fails keeps the containers from starting (kubelet's
// FailedMount); a refresh that fails leaves the old files and retries.
func (p *Pod) syncVolumes(ctx context.Context) error {
	now := time.Now()
	if p.vols.written && (p.vols.next.IsZero() || now.Before(p.vols.next)) {
		return nil
	}
	var next time.Time
	soonest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for i := range p.pod.Spec.Volumes {
		v := &p.pod.Spec.Volumes[i]
		if !volumes.Managed(v) {
			continue
		}
		files, at, err := volumes.Contents(ctx, p.rt.Volumes, p.pod, v, now)
		if err == nil {
			err = volumes.Write(filepath.Join(p.dir, "volumes", v.Name), files)
		}
		if err != nil {
			err = fmt.Errorf("MountVolume.SetUp failed for volume %q: %w", v.Name, err)
			p.event(corev1.EventTypeWarning, "FailedMount", "%s", err)
			if p.vols.written {
				p.vols.next = now.Add(10 * time.Second)
				p.log().Warn("volume refresh failed", "err", err)
				return nil
			}
			return err
		}
		soonest(at)
		if fromObjects(v) {
			soonest(now.Add(volumeRefresh))
		}
	}
	p.vols = apiVolumes{written: true, next: next}
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

// VolumesWake is how long until the volumes are due, capped by d.
func (p *Pod) VolumesWake(d time.Duration) time.Duration {
	if p.vols.next.IsZero() {
		return d
	}
	return min(d, max(time.Until(p.vols.next), 10*time.Millisecond))
}
