package iptables

import (
	"context"
	"fmt"
	"log/slog"

	utiliptables "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// ProxierConfig assembles an iptables-mode proxier.
type ProxierConfig struct {
	Rules Config
	// Sync is the sync's: a full sync rewrites every chain, and the
	// canary is the canary chains, which a flush of the tables removes.
	Sync     proxy.SyncerConfig
	Executor utiliptables.Executor
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
}

// Proxier keeps the kernel's iptables rules in line with the tracker's
// snapshots: a proxy.Syncer whose mode writes iptables-restore input.
// Its Sync is the proxy.SyncFunc of a proxy.Runner.
type Proxier struct {
	*proxy.Syncer
}

// writer is the iptables mode of a Syncer.
type writer struct {
	cfg   ProxierConfig
	log   *slog.Logger
	state *State // what the kernel holds, as far as we know
}

// NewProxier checks cfg and returns a Proxier whose first sync is full.
func NewProxier(cfg ProxierConfig) (*Proxier, error) {
	if err := cfg.Rules.Validate(); err != nil {
		return nil, err
	}
	if cfg.Sync.Tracker == nil || cfg.Executor == nil {
		return nil, fmt.Errorf("iptables: proxier needs a tracker and an executor")
	}
	cfg.Rules = cfg.Rules.withDefaults()
	w := &writer{cfg: cfg}
	cfg.Sync.Mode, cfg.Sync.Family = "iptables", cfg.Rules.Family
	s := proxy.NewSyncer(cfg.Sync, w)
	w.log = s.Logger()
	return &Proxier{Syncer: s}, nil
}

// Apply writes the changed services' chains plus the top-level chains,
// or every chain when w is full.
func (p *writer) Apply(ctx context.Context, w proxy.Write) (proxy.Written, error) {
	var existing []string
	if w.Full {
		if err := p.ensureJumps(ctx); err != nil {
			return proxy.Written{}, err
		}
		// Chains we owned before a restart, or that a failed sync left
		// behind, are only known to the kernel.
		if data, err := p.cfg.Executor.Save(ctx, "nat"); err != nil {
			p.log.Warn("cannot list nat chains; stale chains stay until the next full sync", "err", err)
		} else {
			existing = utiliptables.ChainsIn(data)
		}
	}
	rs := Build(p.cfg.Rules, Input{
		Snapshot:            w.Snapshot,
		Changed:             w.Changed,
		Previous:            p.state,
		Full:                w.Full,
		ExistingNATChains:   existing,
		EditTopLevel:        p.cfg.EditTopLevelChains,
		MaxChainsPerRestore: p.cfg.MaxChainsPerRestore,
	})
	for i, data := range rs.Restores {
		if err := p.cfg.Executor.Restore(ctx, data); err != nil {
			// The restores before this one are in the kernel; each left
			// it coherent, and the full sync that follows a failure
			// rewrites everything anyway.
			return proxy.Written{}, proxy.RestoreFailed(fmt.Errorf("iptables-restore %d of %d (%d bytes): %w", i+1, len(rs.Restores), len(data), err))
		}
	}
	p.state = rs.State
	size := 0
	for _, data := range rs.Restores {
		size += len(data)
	}
	st := rs.Stats
	return proxy.Written{
		Full: rs.Full,
		Stats: proxy.SyncStats{
			ServicePorts: st.ServicePorts, Endpoints: st.Endpoints,
			Rules:        map[string]int{"filter": st.FilterRules, "nat": st.NATRules},
			RulesWritten: map[string]int{"filter": st.FilterRules, "nat": st.NATRulesWritten},
			NoLocal:      map[string]int{"internal": st.NoLocalInternal, "external": st.NoLocalExternal},
		},
		Reachable: func(n svcstate.ServicePortName) (int, bool) {
			if f := rs.State.fragments[n]; f != nil {
				return f.reachable, true
			}
			return 0, false
		},
		Log: []any{"chainsWritten", st.NATChainsWritten, "staleChains", st.StaleChains, "bytes", size, "restores", len(rs.Restores)},
	}, nil
}

// Intact reports whether the canary chains are still there: a flush of
// the tables removes them.
func (p *writer) Intact(ctx context.Context) (bool, error) {
	missing, err := p.canaryMissing(ctx)
	return !missing, err
}

func (p *writer) canaryMissing(ctx context.Context) (bool, error) {
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

func (p *writer) ensureJumps(ctx context.Context) error {
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
