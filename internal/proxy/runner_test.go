package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is a SyncFunc that notes when it ran (in the bubble's fake
// time, relative to the start) and fails while fail says so.
type recorder struct {
	mu    sync.Mutex
	start time.Time
	runs  []time.Duration
	fail  func(n int) bool
}

func (r *recorder) sync(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, time.Since(r.start))
	if r.fail != nil && r.fail(len(r.runs)) {
		return errors.New("boom")
	}
	return nil
}

func (r *recorder) got() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.runs)
}

func startRunner(t *testing.T, cfg RunnerConfig, rec *recorder) (*Runner, context.CancelFunc) {
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	rec.start = time.Now()
	r := NewRunner(cfg, rec.sync)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.Loop(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, cancel
}

func TestRunnerCoalescesBursts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r, _ := startRunner(t, RunnerConfig{MinInterval: time.Second, MaxInterval: -1}, rec)
		synctest.Wait() // the initial sync

		time.Sleep(5 * time.Second)
		for range 100 { // a burst after a quiet period: the first is synced at once
			r.Run()
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(5 * time.Second)
		want := []time.Duration{0, 5 * time.Second, 6 * time.Second}
		if got := rec.got(); !slices.Equal(got, want) {
			t.Errorf("syncs at %v, want %v", got, want)
		}
	})
}

func TestRunnerPeriodic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		startRunner(t, RunnerConfig{MinInterval: time.Second, MaxInterval: time.Minute}, rec)
		time.Sleep(150 * time.Second)
		want := []time.Duration{0, time.Minute, 2 * time.Minute}
		if got := rec.got(); !slices.Equal(got, want) {
			t.Errorf("syncs at %v, want %v", got, want)
		}
	})
}

func TestRunnerRetriesWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{fail: func(n int) bool { return n <= 4 }}
		r, _ := startRunner(t, RunnerConfig{MinInterval: time.Second, MaxInterval: -1, RetryMin: time.Second, RetryMax: 4 * time.Second}, rec)
		time.Sleep(time.Second / 2)
		r.Run() // does not cut the backoff short
		time.Sleep(30 * time.Second)
		// fails at 0, 1, 3, 7; succeeds at 11 (capped at 4s); then quiet.
		want := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second, 11 * time.Second}
		if got := rec.got(); !slices.Equal(got, want) {
			t.Errorf("syncs at %v, want %v", got, want)
		}
		// After recovering, a request is served at once again.
		r.Run()
		synctest.Wait()
		if got := rec.got(); len(got) != 6 || got[5] != 30*time.Second+time.Second/2 {
			t.Errorf("syncs at %v", got)
		}
	})
}

func TestRunnerStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		_, cancel := startRunner(t, RunnerConfig{}, rec)
		synctest.Wait()
		cancel()
		time.Sleep(2 * time.Hour)
		if got := rec.got(); len(got) != 1 {
			t.Errorf("syncs after cancel: %v", got)
		}
	})
}

func TestRunnerPeriodicSyncDoesNotDelayAChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r, _ := startRunner(t, RunnerConfig{MinInterval: time.Second, MaxInterval: time.Minute}, rec)
		time.Sleep(time.Minute + 100*time.Millisecond) // the periodic sync ran 100ms ago
		r.Run()
		synctest.Wait()
		time.Sleep(100 * time.Millisecond) // a second change within the interval waits for it
		r.Run()
		time.Sleep(2 * time.Second)
		want := []time.Duration{0, time.Minute, time.Minute + 100*time.Millisecond, time.Minute + 1100*time.Millisecond}
		if got := rec.got(); !slices.Equal(got, want) {
			t.Errorf("syncs at %v, want %v", got, want)
		}
	})
}

// TestRunnerTidy: a housekeeping sync runs at once and, as a periodic
// one, holds no change back; asked while a change waits for the minimum
// interval, it is that change's sync.
func TestRunnerTidy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r, _ := startRunner(t, RunnerConfig{MinInterval: time.Second, MaxInterval: -1}, rec)
		synctest.Wait() // the initial sync
		time.Sleep(5 * time.Second)
		r.Tidy()
		synctest.Wait()
		time.Sleep(100 * time.Millisecond)
		r.Run() // a change 100 ms after the tidy: at once
		synctest.Wait()
		time.Sleep(100 * time.Millisecond)
		r.Run() // a change within the interval: waits for it
		time.Sleep(100 * time.Millisecond)
		r.Tidy() // served by that change's sync
		time.Sleep(3 * time.Second)
		want := []time.Duration{0, 5 * time.Second, 5100 * time.Millisecond, 6100 * time.Millisecond}
		if got := rec.got(); !slices.Equal(got, want) {
			t.Errorf("syncs at %v, want %v", got, want)
		}
	})
}
