package imagepull

import "time"

// Kubelet's image pull back-off: 10 s after the first failure, doubling
// to 5 min; an image that has not failed for twice the maximum starts
// over at 10 s, as kubelet's flowcontrol.Backoff forgets old entries.
const (
	InitialBackoff = 10 * time.Second
	MaxBackoff     = 300 * time.Second
)

// Backoff is the pull back-off of one pod's images, keyed by image
// reference as written in the spec: kubelet keys it by pod and image,
// so one pod's failures do not hold back another pod's pulls. Not safe
// for concurrent use: it belongs to the pod's worker.
type Backoff struct {
	entries map[string]backoffEntry
}

type backoffEntry struct {
	wait time.Duration // the current back-off
	last time.Time     // the failure it runs from
}

// Failed records a failed pull of image at now and returns when the
// next may start.
func (b *Backoff) Failed(image string, now time.Time) time.Time {
	if b.entries == nil {
		b.entries = map[string]backoffEntry{}
	}
	e, ok := b.entries[image]
	switch {
	case !ok || now.Sub(e.last) > 2*MaxBackoff:
		e.wait = InitialBackoff
	default:
		e.wait = min(2*e.wait, MaxBackoff)
	}
	e.last = now
	b.entries[image] = e
	return now.Add(e.wait)
}

// Until reports when image's back-off ends, if it is in one at now.
func (b *Backoff) Until(image string, now time.Time) (time.Time, bool) {
	e, ok := b.entries[image]
	if !ok {
		return time.Time{}, false
	}
	end := e.last.Add(e.wait)
	return end, now.Before(end)
}

// Succeeded forgets image's failures.
func (b *Backoff) Succeeded(image string) { delete(b.entries, image) }
