package imagepull

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/imagestore"
)

// step is one look at a container (check) or the end of its pull.
type step struct {
	at      time.Duration // since the start
	present bool          // the image is in the store (check)
	done    *Result       // the pull ends (instead of a check)

	// What follows: the container's state ("" for unchanged), whether
	// it starts or a pull starts, and the events, as "Reason: message"
	// prefixes.
	state  string
	start  bool
	pull   bool
	events []string
}

func fail(err error) *Result { return &Result{Err: err} }

// TestImagesSequence drives one container through kubelet's sequences
// of events and waiting reasons.
func TestImagesSequence(t *testing.T) {
	notFound := fmt.Errorf("pulling x: %w: MANIFEST_UNKNOWN", imagestore.ErrNotFound)
	ok := &Result{Took: 1234567 * time.Microsecond, Size: 4096}
	for _, tc := range []struct {
		name   string
		image  string
		policy corev1.PullPolicy
		steps  []step
	}{
		{name: "IfNotPresent, absent: pulled, then started", image: "app:v1", steps: []step{
			{pull: true, events: []string{`Pulling: Pulling image "app:v1"`}},
			{at: 100 * time.Millisecond}, // the pull runs: nothing to do
			{at: 2 * time.Second, done: ok, events: []string{
				`Pulled: Successfully pulled image "app:v1" in 1.234s (1.234s including waiting). Image size: 4096 bytes.`}},
			{at: 2 * time.Second, present: true, start: true},
		}},
		{name: "IfNotPresent, present", image: "app:v1", steps: []step{
			{present: true, start: true, events: []string{`Pulled: Container image "app:v1" already present on machine`}},
		}},
		{name: "Always: pulled at every start", image: "app", steps: []step{
			{present: true, pull: true, events: []string{`Pulling: Pulling image "app"`}},
			{at: time.Second, done: ok, events: []string{`Pulled: Successfully pulled`}},
			{at: time.Second, present: true, start: true},
			{at: time.Minute, present: true, pull: true, events: []string{`Pulling: `}},
		}},
		{name: "Never, absent, then imported", image: "app:v1", policy: corev1.PullNever, steps: []step{
			{state: "ErrImageNeverPull", events: []string{
				`ErrImageNeverPull: Container image "app:v1" is not present with pull policy of Never`, "Failed: Error: ErrImageNeverPull"}},
			{at: 10 * time.Second, state: "ErrImageNeverPull"},
			{at: 20 * time.Second, present: true, start: true, events: []string{`Pulled: `}},
		}},
		{name: "a failing pull backs off", image: "absent:v1", steps: []step{
			{pull: true, events: []string{`Pulling: `}},
			{at: time.Second, done: fail(notFound), state: "ErrImagePull", events: []string{
				`Failed: Failed to pull image "absent:v1": pulling x: image not found`, "Failed: Error: ErrImagePull"}},
			{at: 2 * time.Second, state: "ImagePullBackOff", events: []string{
				`BackOff: Back-off pulling image "absent:v1"`, "Failed: Error: ImagePullBackOff"}},
			{at: 11 * time.Second, pull: true, events: []string{`Pulling: `}},
			// The second failure doubles the back-off: 20 s from 12 s.
			{at: 12 * time.Second, done: fail(notFound), state: "ErrImagePull", events: []string{`Failed: `, "Failed: Error: ErrImagePull"}},
			{at: 13 * time.Second, state: "ImagePullBackOff", events: []string{`BackOff: `, "Failed: Error: ImagePullBackOff"}},
			{at: 32 * time.Second, pull: true, events: []string{`Pulling: `}},
			{at: 33 * time.Second, done: ok, events: []string{`Pulled: Successfully`}},
			{at: 33 * time.Second, present: true, start: true},
		}},
		{name: "an invalid name", image: "Not/Valid", steps: []step{
			{state: "InvalidImageName", events: []string{`InspectFailed: Failed to apply default image tag "Not/Valid": couldn't parse image name`,
				"Failed: Error: InvalidImageName"}},
			{at: MaxBackoff, state: "InvalidImageName"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			spec := &corev1.Container{Name: "c", Image: tc.image, ImagePullPolicy: tc.policy}
			var s Images
			waiting, due := "ContainerCreating", t0
			for i, st := range tc.steps {
				now := t0.Add(st.at)
				var v Verdict
				if st.done != nil {
					evs, w := s.Done(tc.image, *st.done, now)
					v = Verdict{Events: evs, Wait: w}
				} else {
					if now.Before(due) {
						t.Fatalf("step %d: looked at before %v: the worker would not", i, due.Sub(t0))
					}
					v = s.Check(spec, waiting, st.present, now)
					s.Synced()
				}
				if v.Start != st.start || v.Pull != st.pull {
					t.Fatalf("step %d: start %v pull %v, want %v %v", i, v.Start, v.Pull, st.start, st.pull)
				}
				due = now
				if v.Wait != nil {
					waiting, due = v.Wait.Reason, v.Wait.Until
				}
				if st.state != "" && waiting != st.state {
					t.Fatalf("step %d: waiting %q, want %q", i, waiting, st.state)
				}
				if len(v.Events) != len(st.events) {
					t.Fatalf("step %d: events %+v, want %q", i, v.Events, st.events)
				}
				for j, e := range v.Events {
					if got := e.Reason + ": " + e.Message; !strings.HasPrefix(got, st.events[j]) {
						t.Errorf("step %d: event %q, want %q…", i, got, st.events[j])
					}
				}
			}
		})
	}
}

// TestBackOffMessage: the waiting message names the last failure.
func TestBackOffMessage(t *testing.T) {
	t0 := time.Now()
	var s Images
	spec := &corev1.Container{Image: "x:v1"}
	s.Check(spec, "", false, t0)
	_, w := s.Done("x:v1", Result{Err: fmt.Errorf("%w: 401", imagestore.ErrUnauthorized)}, t0)
	if w.Reason != "ErrImagePull" || w.Message != "unauthorized: 401" {
		t.Errorf("after the failure: %+v", w)
	}
	v := s.Check(spec, w.Reason, false, t0.Add(2*time.Second))
	if want := `Back-off pulling image "x:v1": ErrImagePull: unauthorized: 401`; v.Wait == nil || v.Wait.Message != want {
		t.Errorf("back-off %+v, want %q", v.Wait, want)
	}
	if got := v.Wait.Until.Sub(t0); got != InitialBackoff {
		t.Errorf("back-off ends after %v, want %v", got, InitialBackoff)
	}
}

func TestFailsBarePod(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("pulling x: %w: dial tcp: connection refused", imagestore.ErrNetwork), true},
		{fmt.Errorf("pulling x: %w", imagestore.ErrNotFound), false},
		{fmt.Errorf("pulling x: %w", imagestore.ErrUnauthorized), false},
		{fmt.Errorf("pulling x: %w", imagestore.ErrTLS), false},
	} {
		if got := FailsBarePod(tc.err); got != tc.want {
			t.Errorf("FailsBarePod(%v) = %v", tc.err, got)
		}
	}
}
