package restart

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	p := Policy{Initial: time.Second, Max: 5 * time.Second, ResetAfter: time.Minute}
	b := p.New()
	steps := []struct {
		ran  time.Duration
		want time.Duration
	}{
		{0, time.Second},                    // first death
		{time.Second, 2 * time.Second},      // quick deaths double
		{time.Second, 4 * time.Second},      //
		{time.Second, 5 * time.Second},      // up to the ceiling
		{time.Second, 5 * time.Second},      //
		{2 * time.Minute, time.Second},      // a healthy run starts over
		{59 * time.Second, 2 * time.Second}, // just short of it does not
		{time.Minute, time.Second},          // exactly ResetAfter does
		{10 * time.Millisecond, 2 * time.Second},
	}
	for i, s := range steps {
		if got := b.Exited(s.ran); got != s.want || b.Current() != s.want {
			t.Fatalf("step %d (ran %s): wait %s, want %s", i, s.ran, got, s.want)
		}
	}
}

func TestPolicies(t *testing.T) {
	// kubelet's numbers, which users see in CrashLoopBackOff messages.
	if Containers != (Policy{10 * time.Second, 5 * time.Minute, 10 * time.Minute}) {
		t.Errorf("container policy %+v", Containers)
	}
	if Components.Initial > Components.Max || Components.ResetAfter <= Components.Max {
		t.Errorf("component policy %+v", Components)
	}
}
