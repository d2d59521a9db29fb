package imagepull

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/imagestore"
)

// errorShown is how long a failed pull's ErrImagePull stays before the
// container shows ImagePullBackOff: long enough for the status to carry
// it, as kubelet reports the pull's error on the sync that made it and
// the back-off on the next.
const errorShown = time.Second

// Event is an event to record on the pod.
type Event struct {
	Type, Reason, Message string
}

// Waiting is the waiting state to give a container, and when to look at
// it again.
type Waiting struct {
	Reason, Message string
	Until           time.Time
}

// Verdict is what to do about a container that is due to start.
type Verdict struct {
	// Start: its image is there; start it.
	Start bool
	// Pull: start a pull of its image now.
	Pull bool
	// Wait, when set, is the waiting state to give it; neither Start nor
	// Wait: a pull of its image runs, and its end says more.
	Wait   *Waiting
	Events []Event
}

// Result is how a pull ended.
type Result struct {
	Err  error
	Took time.Duration
	Size int64 // of the image pulled
}

// Images is one pod's pulls: which run, which ended just now, their
// back-off. It belongs to the pod's worker.
type Images struct {
	Backoff Backoff
	running map[string]bool
	// fresh are the images pulled since the last sync: the containers
	// due then start from them without another pull, whatever their
	// policy.
	fresh map[string]bool
	// lastErr is the message of each image's last failed pull.
	lastErr map[string]string
}

// Pulling reports whether a pull of image runs.
func (s *Images) Pulling(image string) bool { return s.running[image] }

// Check decides about container spec, due to start, whose image is
// present in the store or not; waiting is its current waiting reason
// ("" for none), so that events are recorded when the state changes,
// not on every look.
func (s *Images) Check(spec *corev1.Container, waiting string, present bool, now time.Time) Verdict {
	image := spec.Image
	if _, err := name.ParseReference(image); err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: couldn't parse image name %q: %v", image, image, err)
		v := Verdict{Wait: &Waiting{Reason: "InvalidImageName", Message: msg, Until: now.Add(MaxBackoff)}}
		if waiting != "InvalidImageName" {
			v.Events = []Event{{corev1.EventTypeWarning, "InspectFailed", msg}, errorEvent("InvalidImageName")}
		}
		return v
	}
	if s.running[image] {
		return Verdict{}
	}
	if s.fresh[image] {
		return Verdict{Start: true}
	}
	switch Decide(Policy(spec), present) {
	case Use:
		return Verdict{Start: true, Events: []Event{{corev1.EventTypeNormal, "Pulled",
			fmt.Sprintf("Container image %q already present on machine", image)}}}
	case NeverPull:
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
		// An image imported meanwhile (svcnet load) is found on the next look.
		v := Verdict{Wait: &Waiting{Reason: "ErrImageNeverPull", Message: msg, Until: now.Add(InitialBackoff)}}
		if waiting != "ErrImageNeverPull" {
			v.Events = []Event{{corev1.EventTypeWarning, "ErrImageNeverPull", msg}, errorEvent("ErrImageNeverPull")}
		}
		return v
	}
	if until, ok := s.Backoff.Until(image, now); ok {
		msg := fmt.Sprintf("Back-off pulling image %q: ErrImagePull: %s", image, s.lastErr[image])
		v := Verdict{Wait: &Waiting{Reason: "ImagePullBackOff", Message: msg, Until: until}}
		if waiting != "ImagePullBackOff" {
			v.Events = []Event{{corev1.EventTypeNormal, "BackOff", fmt.Sprintf("Back-off pulling image %q", image)},
				errorEvent("ImagePullBackOff")}
		}
		return v
	}
	if s.running == nil {
		s.running = map[string]bool{}
	}
	s.running[image] = true
	return Verdict{Pull: true, Events: []Event{{corev1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", image)}}}
}

// Synced ends a sync: images pulled before it are no longer fresh, and a
// container of policy Always that starts later pulls again, as kubelet
// pulls at every start.
func (s *Images) Synced() { clear(s.fresh) }

// Done records the end of a pull of image and returns its events and,
// when it failed, the waiting state of the containers that wait for it.
func (s *Images) Done(image string, r Result, now time.Time) ([]Event, *Waiting) {
	delete(s.running, image)
	if r.Err == nil {
		s.Backoff.Succeeded(image)
		if s.fresh == nil {
			s.fresh = map[string]bool{}
		}
		s.fresh[image] = true
		took := r.Took.Truncate(time.Millisecond)
		return []Event{{corev1.EventTypeNormal, "Pulled", fmt.Sprintf(
			"Successfully pulled image %q in %v (%v including waiting). Image size: %d bytes.", image, took, took, r.Size)}}, nil
	}
	reason := imagestore.Reason(r.Err)
	if s.lastErr == nil {
		s.lastErr = map[string]string{}
	}
	s.lastErr[image] = r.Err.Error()
	s.Backoff.Failed(image, now)
	evs := []Event{{corev1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q: %v", image, r.Err)}, errorEvent(reason)}
	return evs, &Waiting{Reason: reason, Message: r.Err.Error(), Until: now.Add(errorShown)}
}

// errorEvent is kubelet's "Error: <reason>" that follows a container's
// failure to be created.
func errorEvent(reason string) Event {
	return Event{corev1.EventTypeWarning, "Failed", "Error: " + reason}
}

// FailsBarePod reports whether a failed pull fails a pod of no controller
// at once rather than leaving it in ImagePullBackOff: only when neither
// the registry nor any mirror could be reached (a machine without a route
// to them, as svcnet's clusters often are), and only before any of the
// pod's containers has started. svcnet's images used to be built in
// only, and `kubectl run -it` of an image it cannot get says so at once
// instead of timing out; an image that is missing, or refused without
// credentials, may yet be pushed or its secret created, so such a pod
// backs off as in kubelet.
func FailsBarePod(err error) bool { return errors.Is(err, imagestore.ErrNetwork) }
