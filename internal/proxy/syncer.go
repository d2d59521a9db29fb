package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/svcstate"
)

// Mode is what a proxy mode adds to the Syncer: how to bring the kernel in
// line with a snapshot, and how to tell cheaply that the kernel still holds
// what it wrote. Everything else a sync is — taking the tracker's changes
// and keeping those a failed sync could not apply, choosing between a full
// and a partial sync, metrics, the log line, health and what must follow a
// sync — is the Syncer's, the same for every mode.
//
// The Syncer calls a mode's methods one at a time, never concurrently.
type Mode interface {
	// Apply brings the kernel in line with w.Snapshot. A partial write
	// (w.Full false) may rely on the kernel holding what the last
	// successful Apply wrote, and writes what w.Changed needs; a full one
	// compares with or rewrites everything, and so repairs what others
	// changed. After an error the next write is full.
	Apply(ctx context.Context, w Write) (Written, error)
	// Intact reports whether the kernel still holds what the mode last
	// wrote (a canary chain, its table, counts of what it wrote). The
	// Syncer asks every CanaryPeriod between full syncs, and writes
	// everything again when it does not.
	Intact(ctx context.Context) (bool, error)
}

// Write is what one sync asks of a mode.
type Write struct {
	Snapshot *svcstate.Snapshot
	// Changed holds the service ports whose rules may differ from what
	// the last successful Apply wrote: the tracker's changes since then,
	// with those of failed syncs.
	Changed map[svcstate.ServicePortName]struct{}
	Full    bool
}

// Written is what a mode reports of a successful Apply.
type Written struct {
	// Full says the write was full: a mode may make a partial write full
	// when it finds it must (kube-ipvs0 had to be created again, emptied
	// chains could not be deleted).
	Full bool
	// Again asks the next sync to call Apply even if nothing changed:
	// the mode has work left that no event brings (real servers
	// draining, emptied chains waiting to be deleted). Syncer.Again
	// reports it, for whoever kicks the runner.
	Again bool
	Stats SyncStats
	// Reachable says how many endpoints a changed service port reaches
	// now, false if the mode no longer serves it; for the log line.
	Reachable func(svcstate.ServicePortName) (int, bool)
	// Log is the mode's own attributes for the sync's log line.
	Log []any
}

// SyncStats are the counts a sync leaves behind, for the metrics.
type SyncStats struct {
	ServicePorts, Endpoints int
	// Rules and RulesWritten are the rules by table ("filter", "nat"):
	// in all, and written by this sync. Nil for a mode without rule
	// tables to count.
	Rules, RulesWritten map[string]int
	// NoLocal counts the service ports with a Local traffic policy and
	// no local endpoint, by policy ("internal", "external"); nil for a
	// mode that does not count them.
	NoLocal map[string]int
}

// ToolError marks the failure of one of the writes kube-proxy counts in
// a metric of its own: an iptables-restore, an nf_tables transaction.
type ToolError struct {
	Tool Tool
	Err  error
}

// Tool is a kernel-writing tool whose failures kube-proxy counts.
type Tool int

const (
	IPTablesRestore Tool = iota + 1
	NFTablesTransaction
)

func (e *ToolError) Error() string { return e.Err.Error() }
func (e *ToolError) Unwrap() error { return e.Err }

// RestoreFailed marks err as a failed iptables-restore.
func RestoreFailed(err error) error { return &ToolError{Tool: IPTablesRestore, Err: err} }

// TransactionFailed marks err as a failed nf_tables transaction.
func TransactionFailed(err error) error { return &ToolError{Tool: NFTablesTransaction, Err: err} }

// SyncerConfig assembles a Syncer. Every mode's proxier config holds one
// (Sync); the mode fills in Mode and Family.
type SyncerConfig struct {
	// Mode and Family name the proxier in logs.
	Mode    string
	Family  v1.IPFamily
	Tracker *svcstate.Tracker
	Metrics *Metrics     // optional
	Logger  *slog.Logger // optional
	// FullSyncPeriod is the longest time between two full syncs.
	// Default 1h.
	FullSyncPeriod time.Duration
	// CanaryPeriod is how often the Syncer asks the mode whether the
	// kernel still holds what it wrote. Default 30s.
	CanaryPeriod time.Duration
	// AfterSync, if set, is called after every successful sync, outside
	// the Syncer's lock: health-check servers and conntrack cleanup
	// follow the rules, never precede them.
	AfterSync func(SyncResult)
	// Now defaults to time.Now.
	Now func() time.Time
}

// Syncer is the sync of every proxy mode: its Sync is the SyncFunc of a
// Runner. A sync takes the tracker's snapshot and changes, decides
// whether to write everything (the first sync, after a failure, every
// FullSyncPeriod, when the canary finds the kernel changed, on request)
// or only what changed, has the mode write it, and then records, logs and
// reports it. A sync with nothing to write confirms the snapshot without
// calling the mode.
type Syncer struct {
	cfg  SyncerConfig
	mode Mode

	mu          sync.Mutex
	pending     svcstate.Changes // taken from the tracker, not yet written
	applied     *svcstate.Snapshot
	lastSuccess time.Time
	lastFull    time.Time
	lastCanary  time.Time
	needFull    bool
	again       bool
	// programmed is the slice version the kernel reflects (see
	// Programmed).
	programmed uint64
}

// NewSyncer returns a Syncer whose first sync is full.
func NewSyncer(cfg SyncerConfig, mode Mode) *Syncer {
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
	if cfg.Family == "" {
		cfg.Family = v1.IPv4Protocol
	}
	cfg.Logger = cfg.Logger.With("proxyMode", cfg.Mode, "ipFamily", string(cfg.Family))
	return &Syncer{cfg: cfg, mode: mode, needFull: true}
}

// RequestFullSync makes the next sync write everything.
func (s *Syncer) RequestFullSync() {
	s.mu.Lock()
	s.needFull = true
	s.mu.Unlock()
}

// LastSuccess is when the kernel last matched a snapshot; /healthz
// reports it.
func (s *Syncer) LastSuccess() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSuccess
}

// Applied returns the snapshot the kernel last matched, nil before the
// first successful sync. Health-check servers read local endpoint counts
// from it, so that they agree with the rules.
func (s *Syncer) Applied() *svcstate.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

// Programmed is the watermark of what the kernel holds: every
// EndpointSlice change up to this resourceVersion that the tracker was
// handed is in the rules (svcstate.Changes.SliceVersion). It moves only
// with a successful sync, 0 before the first.
func (s *Syncer) Programmed() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.programmed
}

// Logger is the proxier's logger, with its mode and family: the mode
// logs through it too.
func (s *Syncer) Logger() *slog.Logger { return s.cfg.Logger }

// Again reports whether the mode has work left that no event will bring:
// the runner should sync again soon.
func (s *Syncer) Again() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.again
}

// Sync brings the kernel in line with the tracker's latest snapshot.
func (s *Syncer) Sync(ctx context.Context) error {
	res, err := s.sync(ctx)
	if err == nil && s.cfg.AfterSync != nil {
		s.cfg.AfterSync(res)
	}
	return err
}

func (s *Syncer) sync(ctx context.Context) (SyncResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := s.cfg.Now()
	snap, changes := s.cfg.Tracker.Snapshot()
	s.pending.Merge(changes)
	changed := len(s.pending.Ports) > 0
	full := s.needFull || start.Sub(s.lastFull) >= s.cfg.FullSyncPeriod
	// A sync with changes checks the canary after it has written them,
	// so that the check never delays them.
	canaryDue := !full && start.Sub(s.lastCanary) >= s.cfg.CanaryPeriod
	if canaryDue && !changed {
		canaryDue = false
		intact, err := s.canary(ctx, start)
		if err != nil {
			return SyncResult{}, s.failed(false, err)
		}
		full = !intact
	}
	if !full && !changed && !s.again {
		// Events that changed nothing for us: the kernel already matches.
		res := SyncResult{Previous: s.applied, Current: snap}
		s.applied, s.lastSuccess = snap, start
		s.programmed = max(s.programmed, s.pending.SliceVersion)
		s.pending = svcstate.Changes{}
		return res, nil
	}

	w, err := s.mode.Apply(ctx, Write{Snapshot: snap, Changed: s.pending.Ports, Full: full})
	if err != nil {
		return SyncResult{}, s.failed(full, err)
	}
	done := s.cfg.Now()
	res := SyncResult{Previous: s.applied, Current: snap, Changed: s.pending.Ports}
	if s.applied == nil {
		// The first sync reaches every port, whatever the tracker
		// reported: those who follow the rules start from nothing.
		res.Changed = allPorts(snap)
	}
	s.applied, s.lastSuccess, s.needFull, s.again = snap, done, false, w.Again
	if w.Full {
		s.lastFull, s.lastCanary = done, done
	}
	if w.Full || changed {
		s.logSync(w, done.Sub(start))
		s.observe(w, start, done)
	}
	s.programmed = max(s.programmed, s.pending.SliceVersion)
	s.pending = svcstate.Changes{}
	if canaryDue && !w.Full {
		if intact, err := s.canary(ctx, done); err != nil || !intact {
			if err != nil {
				s.cfg.Logger.Warn("cannot check the kernel's state; the next sync writes everything", "err", err)
			}
			s.needFull = true
		}
	}
	return res, nil
}

// canary asks the mode whether the kernel still holds what it wrote.
func (s *Syncer) canary(ctx context.Context, now time.Time) (bool, error) {
	intact, err := s.mode.Intact(ctx)
	if err != nil {
		return false, fmt.Errorf("check the kernel's state: %w", err)
	}
	s.lastCanary = now
	if !intact {
		s.cfg.Logger.Warn("the proxy's kernel state was changed by someone else; writing it all again")
	}
	return intact, nil
}

// failed records a failed sync. What the kernel holds is no longer known
// for sure, so the next sync is full; the pending changes are kept.
func (s *Syncer) failed(full bool, err error) error {
	s.needFull = true
	m := s.cfg.Metrics
	if m == nil {
		return err
	}
	m.SyncFailures.Inc()
	var te *ToolError
	if errors.As(err, &te) {
		switch te.Tool {
		case IPTablesRestore:
			m.RestoreFailures.Inc()
			if !full {
				m.PartialRestoreFailures.Inc()
			}
		case NFTablesTransaction:
			m.NFTablesSyncFailures.Inc()
		}
	}
	return err
}

func allPorts(snap *svcstate.Snapshot) map[svcstate.ServicePortName]struct{} {
	out := map[svcstate.ServicePortName]struct{}{}
	for svc := range snap.All {
		for _, n := range svc.EndpointPorts() {
			out[n] = struct{}{}
		}
	}
	return out
}

// maxLoggedChanges keeps a sync's log line short when thousands of
// services change at once.
const maxLoggedChanges = 10

func (s *Syncer) logSync(w Written, took time.Duration) {
	ports := slices.SortedFunc(maps.Keys(s.pending.Ports), svcstate.ServicePortName.Compare)
	more := 0
	if len(ports) > maxLoggedChanges {
		more, ports = len(ports)-maxLoggedChanges, ports[:maxLoggedChanges]
	}
	// What each changed port now reaches, in the order of changed.
	names, reach := make([]string, len(ports)), make([]string, len(ports))
	for i, n := range ports {
		names[i] = n.String() + "/" + strings.ToLower(string(n.Protocol))
		reach[i] = "removed"
		if w.Reachable != nil {
			if r, ok := w.Reachable(n); ok {
				reach[i] = strconv.Itoa(r)
			}
		}
	}
	attrs := append([]any{"full", w.Full, "took", took, "changed", names, "endpoints", reach, "moreChanged", more,
		"servicePorts", w.Stats.ServicePorts}, w.Log...)
	s.cfg.Logger.Info(fmt.Sprintf("synced %s rules", s.cfg.Mode), attrs...)
}

func (s *Syncer) observe(w Written, start, done time.Time) {
	m := s.cfg.Metrics
	if m == nil {
		return
	}
	took := done.Sub(start).Seconds()
	m.SyncDuration.Observe(took)
	if w.Full {
		m.SyncFullDuration.Observe(took)
	} else {
		m.SyncPartialDuration.Observe(took)
	}
	for _, t := range s.pending.TriggerTimes {
		if !t.IsZero() {
			m.NetworkProgramming.Observe(done.Sub(t).Seconds())
		}
	}
	m.LastSync.Set(float64(done.UnixNano()) / 1e9)
	for table, n := range w.Stats.Rules {
		m.Rules.WithLabelValues(table).Set(float64(n))
	}
	for table, n := range w.Stats.RulesWritten {
		m.RulesLastSync.WithLabelValues(table).Set(float64(n))
	}
	for policy, n := range w.Stats.NoLocal {
		m.NoLocalEndpoints.WithLabelValues(policy).Set(float64(n))
	}
	m.ServiceChanges.Add(float64(len(s.pending.Ports)))
	m.EndpointChanges.Add(float64(len(s.pending.Services)))
	m.Services.Set(float64(w.Stats.ServicePorts))
	m.Endpoints.Set(float64(w.Stats.Endpoints))
}
