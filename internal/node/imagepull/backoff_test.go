package imagepull

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b Backoff
	if _, in := b.Until("a", t0); in {
		t.Fatal("in back-off before any failure")
	}
	// Failures as the worker retries them, each at its back-off's end.
	now := t0
	for i, want := range []time.Duration{10, 20, 40, 80, 160, 300, 300} {
		next := b.Failed("a", now)
		if got := next.Sub(now); got != want*time.Second {
			t.Fatalf("failure %d: back-off %v, want %v", i+1, got, want*time.Second)
		}
		if until, in := b.Until("a", now.Add(time.Second)); !in || !until.Equal(next) {
			t.Fatalf("failure %d: Until %v %v, want %v", i+1, until, in, next)
		}
		if _, in := b.Until("b", now); in {
			t.Fatal("another image is held back")
		}
		now = next
		if _, in := b.Until("a", now); in {
			t.Fatalf("failure %d: still in back-off at its end", i+1)
		}
	}
	// A failure long after the last starts over.
	now = now.Add(2*MaxBackoff + time.Second)
	if got := b.Failed("a", now).Sub(now); got != InitialBackoff {
		t.Errorf("after a long quiet: %v, want %v", got, InitialBackoff)
	}
	b.Failed("a", now)
	b.Succeeded("a")
	if _, in := b.Until("a", now); in {
		t.Error("in back-off after a success")
	}
	if got := b.Failed("a", now).Sub(now); got != InitialBackoff {
		t.Errorf("after a success: %v, want %v", got, InitialBackoff)
	}
}
