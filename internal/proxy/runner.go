package proxy

import (
	"context"
	"log/slog"
	"time"
)

// SyncFunc brings the kernel in line with the latest snapshot.
type SyncFunc func(ctx context.Context) error

// RunnerConfig tunes a Runner. Zero durations take the defaults noted.
type RunnerConfig struct {
	Name string
	// MinInterval is the least time between the starts of two syncs: a
	// burst of changes within it becomes one sync. A change after a quiet
	// period is synced at once. Default 100ms.
	MinInterval time.Duration
	// MaxInterval is the most time between two syncs: a periodic resync
	// that repairs kernel state changed behind our back. Default 1h;
	// negative disables it.
	MaxInterval time.Duration
	// RetryMin is the delay before the first retry after a failed sync;
	// each further failure doubles it, up to RetryMax. Defaults
	// MinInterval and 30s.
	RetryMin time.Duration
	RetryMax time.Duration
	Logger   *slog.Logger
}

// Runner calls a SyncFunc when asked, coalescing bursts of requests,
// periodically, and again after failures. kube-proxy's
// BoundedFrequencyRunner has the same job.
type Runner struct {
	cfg  RunnerConfig
	fn   SyncFunc
	kick chan struct{}
	tidy chan struct{}
}

// NewRunner returns a Runner for fn; call Loop to start it.
func NewRunner(cfg RunnerConfig, fn SyncFunc) *Runner {
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = 100 * time.Millisecond
	}
	if cfg.MaxInterval == 0 {
		cfg.MaxInterval = time.Hour
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = cfg.MinInterval
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 30 * time.Second
	}
	if cfg.RetryMax < cfg.RetryMin {
		cfg.RetryMax = cfg.RetryMin
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Runner{cfg: cfg, fn: fn, kick: make(chan struct{}, 1), tidy: make(chan struct{}, 1)}
}

// Run asks for a sync as soon as the minimum interval allows. It never
// blocks, so it can be an event handler's OnChange.
func (r *Runner) Run() {
	select {
	case r.kick <- struct{}{}:
	default: // a request is already queued; one sync serves both
	}
}

// Tidy asks for a sync now for a mode's own housekeeping (chains to
// delete, real servers done draining): like the periodic sync it does
// not count as a change's, so the next change is not held back by the
// minimum interval. It never blocks.
func (r *Runner) Tidy() {
	select {
	case r.tidy <- struct{}{}:
	default:
	}
}

// Loop syncs once at once, then as requested, periodically and on retry,
// until ctx ends. Start it once the informers have synced, so that the
// first sync sees the whole cluster.
func (r *Runner) Loop(ctx context.Context) {
	var (
		lastStart time.Time
		// lastAsked is when the last sync that served requests started:
		// the minimum interval separates those, so that a periodic
		// resync, which served none, never delays a change.
		lastAsked time.Time
		pending   = true
		tidy      bool
		failures  int
		// Since Go 1.23 Reset and Stop never leave a stale tick behind, so
		// the timer needs no draining.
		timer = time.NewTimer(time.Hour)
	)
	timer.Stop()
	defer timer.Stop()
	for {
		now := time.Now()
		var due time.Time
		switch {
		case failures > 0:
			// New requests do not cut a backoff short: the retry applies
			// them anyway, and hammering a failing kernel helps no one.
			due = lastStart.Add(r.backoff(failures))
		case pending:
			due = lastAsked.Add(r.cfg.MinInterval)
		case tidy:
			due = now
		case r.cfg.MaxInterval > 0:
			due = lastStart.Add(r.cfg.MaxInterval)
		}
		if !due.IsZero() && !due.After(now) {
			if pending || failures > 0 {
				lastAsked = now
			}
			pending, tidy = false, false
			lastStart = now
			if err := r.fn(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				failures++
				r.cfg.Logger.Warn("sync failed, retrying", "runner", r.cfg.Name, "failures", failures,
					"retryIn", r.backoff(failures), "err", err)
			} else {
				if failures > 0 {
					r.cfg.Logger.Info("sync recovered", "runner", r.cfg.Name, "after", failures)
				}
				failures = 0
			}
			continue
		}
		var wake <-chan time.Time
		if !due.IsZero() {
			timer.Reset(due.Sub(now))
			wake = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
			pending = true
		case <-r.tidy:
			tidy = true
		case <-wake:
		}
		timer.Stop()
	}
}

func (r *Runner) backoff(failures int) time.Duration {
	d := r.cfg.RetryMin
	for i := 1; i < failures && d < r.cfg.RetryMax; i++ {
		d *= 2
	}
	return min(d, r.cfg.RetryMax)
}
