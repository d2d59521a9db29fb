package iptables

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	utiliptables "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// ProxierConfig assembles an iptables-mode proxier.
type ProxierConfig struct {
	Rules    Config
	Tracker  *svcstate.Tracker
	Executor utiliptables.Executor
	Metrics  *proxy.Metrics // optional
	Logger   *slog.Logger   // optional
	// FullSyncPeriod is the longest time between two full syncs, which
	// rewrite every chain and so repair rules changed behind our back.
	// Default 1h.
	FullSyncPeriod time.Duration
	// CanaryPeriod is how often a partial sync first checks that the
	// canary chains still exist, so that a flush of the tables is repaired
	// by the next sync rather than the next full one. Default 30s.
	CanaryPeriod time.Duration
	// EditTopLevelChains makes partial syncs edit the top-level chains
	// rule by rule rather than rewrite them (see Input.EditTopLevel): the
	// way to keep one change cheap at 10,000 services. -D and -I inside
	// `iptables-restore --noflush` work on both the nft and the legacy
	// backend of iptables 1.8.9 (test/e2e/proxy compares the kernel's
	// rules after editing syncs with a full sync's); `svcnet proxy` turns
	// it on.
	EditTopLevelChains bool
	// MaxChainsPerRestore splits big syncs into several restores (see
	// Input.MaxChainsPerRestore); 0 never splits. The nft backend needs
	// it beyond a few thousand services, the legacy one does not (it
	// rewrites the whole table per restore, so fewer is faster).
	MaxChainsPerRestore int
	// AfterSync, if set, is called after every sync that changed or
	// confirmed the rules, outside the proxier's lock.
	AfterSync func(proxy.SyncResult)
	// Now defaults to time.Now.
	Now func() time.Time
}

// Proxier keeps the kernel's iptables rules in line with the tracker's
// snapshots. Its Sync is the proxy.SyncFunc of a proxy.Runner.
type Proxier struct {
	cfg ProxierConfig

	mu          sync.Mutex
	state       *State           // what the kernel holds, as far as we know
	pending     svcstate.Changes // taken from the tracker, not yet in the kernel
	needFull    bool
	lastFull    time.Time
	lastSuccess time.Time
	lastCanary  time.Time
	applied     *svcstate.Snapshot
}

// NewProxier checks cfg and returns a Proxier whose first sync is full.
func NewProxier(cfg ProxierConfig) (*Proxier, error) {
	if err := cfg.Rules.Validate(); err != nil {
		return nil, err
	}
	if cfg.Tracker == nil || cfg.Executor == nil {
		return nil, fmt.Errorf("iptables: proxier needs a tracker and an executor")
	}
	cfg.Rules = cfg.Rules.withDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.FullSyncPeriod <= 0 {
		cfg.FullSyncPeriod = time.Hour
	}
	if cfg.CanaryPeriod <= 0 {
		cfg.CanaryPeriod = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Logger = cfg.Logger.With("proxyMode", "iptables", "ipFamily", string(cfg.Rules.Family))
	return &Proxier{cfg: cfg, needFull: true}, nil
}

// RequestFullSync makes the next sync rewrite every chain.
func (p *Proxier) RequestFullSync() {
	p.mu.Lock()
	p.needFull = true
	p.mu.Unlock()
}

// LastSuccess is when the kernel last matched a snapshot; /healthz
// reports it.
func (p *Proxier) LastSuccess() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastSuccess
}

// Applied returns the snapshot the kernel's rules were last built from,
// nil before the first successful sync. Health-check servers read local
// endpoint counts from it, so they agree with the rules.
func (p *Proxier) Applied() *svcstate.Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied
}

// Sync brings the kernel in line with the tracker's latest snapshot:
// partially (the changed services' chains plus the top-level chains), or
// fully on the first sync, after a failure and periodically.
func (p *Proxier) Sync(ctx context.Context) error {
	res, err := p.sync(ctx)
	if err == nil && p.cfg.AfterSync != nil && len(res.Changed) > 0 {
		p.cfg.AfterSync(res)
	}
	return err
}

func (p *Proxier) sync(ctx context.Context) (proxy.SyncResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	start := p.cfg.Now()
	snap, changes := p.cfg.Tracker.Snapshot()
	p.pending.Merge(changes)
	full := p.needFull || p.state == nil || start.Sub(p.lastFull) >= p.cfg.FullSyncPeriod
	// The canary check costs a few iptables runs. A sync with changes
	// checks after it has applied them, so that it never delays them.
	canaryDue := !full && start.Sub(p.lastCanary) >= p.cfg.CanaryPeriod
	if canaryDue && len(p.pending.Ports) == 0 {
		canaryDue = false
		flushed, err := p.canaryMissing(ctx)
		if err != nil {
			return proxy.SyncResult{}, p.failed(false, err)
		}
		p.lastCanary = start
		if flushed {
			p.cfg.Logger.Warn("iptables rules were flushed by someone else; rewriting them all")
			full = true
		}
	}
	if !full && len(p.pending.Ports) == 0 {
		// Events that changed nothing for us; the kernel already matches.
		p.applied, p.lastSuccess = snap, start
		p.pending = svcstate.Changes{}
		return proxy.SyncResult{}, nil
	}

	var existing []string
	if full {
		if err := p.ensureJumps(ctx); err != nil {
			return proxy.SyncResult{}, p.failed(full, err)
		}
		// Chains we owned before a restart, or that a failed sync left
		// behind, are only known to the kernel.
		if data, err := p.cfg.Executor.Save(ctx, "nat"); err != nil {
			p.cfg.Logger.Warn("cannot list nat chains; stale chains stay until the next full sync", "err", err)
		} else {
			existing = utiliptables.ChainsIn(data)
		}
	}
	rs := Build(p.cfg.Rules, Input{
		Snapshot:            snap,
		Changed:             p.pending.Ports,
		Previous:            p.state,
		Full:                full,
		ExistingNATChains:   existing,
		EditTopLevel:        p.cfg.EditTopLevelChains,
		MaxChainsPerRestore: p.cfg.MaxChainsPerRestore,
	})
	for i, data := range rs.Restores {
		if err := p.cfg.Executor.Restore(ctx, data); err != nil {
			// The restores before this one are in the kernel; each left
			// it coherent, and the full sync that follows a failure
			// rewrites everything anyway.
			return proxy.SyncResult{}, p.failed(rs.Full, fmt.Errorf("iptables-restore %d of %d (%d bytes): %w", i+1, len(rs.Restores), len(data), err))
		}
	}

	done := p.cfg.Now()
	res := proxy.SyncResult{Previous: p.applied, Current: snap, Changed: p.pending.Ports}
	p.state, p.applied, p.lastSuccess, p.needFull = rs.State, snap, done, false
	if rs.Full {
		p.lastFull, p.lastCanary = done, done
	}
	p.logSync(rs, done.Sub(start))
	p.observe(rs, start, done)
	p.pending = svcstate.Changes{}
	if canaryDue {
		if flushed, err := p.canaryMissing(ctx); err != nil {
			p.cfg.Logger.Warn("cannot check the canary chains", "err", err)
		} else {
			p.lastCanary = done
			if flushed {
				p.cfg.Logger.Warn("iptables rules were flushed by someone else; the next sync rewrites them all")
				p.needFull = true
			}
		}
	}
	return res, nil
}

// failed records a failed sync. The kernel still holds the previous rules
// (restores are atomic) but something unexpected happened, possibly to
// chains we rely on, so the next sync is full. Pending changes are kept.
func (p *Proxier) failed(full bool, err error) error {
	p.needFull = true
	if m := p.cfg.Metrics; m != nil {
		m.RestoreFailures.Inc()
		if !full {
			m.PartialRestoreFailures.Inc()
		}
	}
	return err
}

func (p *Proxier) canaryMissing(ctx context.Context) (bool, error) {
	for _, t := range canaryTables {
		ok, err := p.cfg.Executor.ChainExists(ctx, t, ChainCanary)
		if err != nil {
			return false, fmt.Errorf("check canary %s/%s: %w", t, ChainCanary, err)
		}
		if !ok {
			return true, nil
		}
	}
	return false, nil
}

func (p *Proxier) ensureJumps(ctx context.Context) error {
	for _, t := range canaryTables {
		if err := p.cfg.Executor.EnsureChain(ctx, t, ChainCanary); err != nil {
			return fmt.Errorf("ensure canary %s/%s: %w", t, ChainCanary, err)
		}
	}
	for _, j := range JumpRules(p.cfg.Rules) {
		if err := p.cfg.Executor.EnsureChain(ctx, j.Table, j.Target); err != nil {
			return fmt.Errorf("ensure chain %s/%s: %w", j.Table, j.Target, err)
		}
		if err := p.cfg.Executor.EnsureRule(ctx, j.Table, j.Chain, j.Args()...); err != nil {
			return fmt.Errorf("ensure jump %s/%s -> %s: %w", j.Table, j.Chain, j.Target, err)
		}
	}
	return nil
}

// maxLoggedChanges keeps a sync's log line short when thousands of
// services change at once.
const maxLoggedChanges = 10

func (p *Proxier) logSync(rs *RuleSet, took time.Duration) {
	ports := slices.SortedFunc(maps.Keys(p.pending.Ports), svcstate.ServicePortName.Compare)
	more := 0
	if len(ports) > maxLoggedChanges {
		more, ports = len(ports)-maxLoggedChanges, ports[:maxLoggedChanges]
	}
	// What each changed port now reaches, in the order of changed.
	names, reach := make([]string, len(ports)), make([]string, len(ports))
	for i, n := range ports {
		names[i] = n.String() + "/" + strings.ToLower(string(n.Protocol))
		reach[i] = "removed"
		if f := rs.State.fragments[n]; f != nil {
			reach[i] = strconv.Itoa(f.reachable)
		}
	}
	size := 0
	for _, data := range rs.Restores {
		size += len(data)
	}
	p.cfg.Logger.Info("synced iptables rules", "full", rs.Full, "took", took,
		"changed", names, "endpoints", reach, "moreChanged", more, "servicePorts", rs.Stats.ServicePorts,
		"chainsWritten", rs.Stats.NATChainsWritten, "staleChains", rs.Stats.StaleChains,
		"bytes", size, "restores", len(rs.Restores))
}

func (p *Proxier) observe(rs *RuleSet, start, done time.Time) {
	m := p.cfg.Metrics
	if m == nil {
		return
	}
	took := done.Sub(start).Seconds()
	m.SyncDuration.Observe(took)
	if rs.Full {
		m.SyncFullDuration.Observe(took)
	} else {
		m.SyncPartialDuration.Observe(took)
	}
	for _, t := range p.pending.TriggerTimes {
		if !t.IsZero() {
			m.NetworkProgramming.Observe(done.Sub(t).Seconds())
		}
	}
	m.LastSync.Set(float64(done.UnixNano()) / 1e9)
	m.Rules.WithLabelValues("filter").Set(float64(rs.Stats.FilterRules))
	m.Rules.WithLabelValues("nat").Set(float64(rs.Stats.NATRules))
	m.RulesLastSync.WithLabelValues("filter").Set(float64(rs.Stats.FilterRules))
	m.RulesLastSync.WithLabelValues("nat").Set(float64(rs.Stats.NATRulesWritten))
	m.NoLocalEndpoints.WithLabelValues("internal").Set(float64(rs.Stats.NoLocalInternal))
	m.NoLocalEndpoints.WithLabelValues("external").Set(float64(rs.Stats.NoLocalExternal))
	m.ServiceChanges.Add(float64(len(p.pending.Ports)))
	m.EndpointChanges.Add(float64(len(p.pending.Services)))
	m.Services.Set(float64(rs.Stats.ServicePorts))
	m.Endpoints.Set(float64(rs.Stats.Endpoints))
}
