package nftables

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"

	nft "github.com/svcnet/svcnet/internal/nftables"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// Kernel is the nf_tables of the proxy's network namespace: a netlink
// connection and a reader of kube-proxy's table, opened in it.
type Kernel struct {
	Conn   *nft.Conn
	Reader *nft.Reader
}

// OpenKernel opens both in the calling thread's network namespace.
func OpenKernel(f v1.IPFamily) (*Kernel, error) {
	c, err := nft.Open()
	if err != nil {
		return nil, err
	}
	fam := nft.IPv4
	if f == v1.IPv6Protocol {
		fam = nft.IPv6
	}
	r, err := nft.OpenReader(fam, TableName)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &Kernel{Conn: c, Reader: r}, nil
}

// Close closes the sockets.
func (k *Kernel) Close() error {
	return errors.Join(k.Conn.Close(), k.Reader.Close())
}

// ProxierConfig assembles an nftables-mode proxier.
type ProxierConfig struct {
	Rules   Config
	Tracker *svcstate.Tracker
	Kernel  *Kernel
	Metrics *proxy.Metrics // optional
	Logger  *slog.Logger   // optional
	// FullSyncPeriod is the longest time between two full syncs, which
	// rewrite the whole table and so repair changes made behind our back.
	// Default 1h.
	FullSyncPeriod time.Duration
	// CanaryPeriod is how often a sync first checks that the table still
	// exists, so that someone deleting it is repaired by the next sync.
	// Default 30s.
	CanaryPeriod time.Duration
	// StaleChainDelay is how long an emptied chain waits before it is
	// deleted. Default 1s, as kube-proxy.
	StaleChainDelay time.Duration
	// AfterSync, if set, is called after every sync that changed or
	// confirmed the rules, outside the proxier's lock.
	AfterSync func(proxy.SyncResult)
	// Now defaults to time.Now.
	Now func() time.Time
}

// Proxier keeps kube-proxy's nftables table in line with the tracker's
// snapshots. Its Sync is the proxy.SyncFunc of a proxy.Runner.
type Proxier struct {
	cfg ProxierConfig
	fam nft.Family

	mu          sync.Mutex
	state       *State
	pending     svcstate.Changes
	needFull    bool
	recreate    bool // the next full sync deletes the table first
	lastFull    time.Time
	lastSuccess time.Time
	lastCanary  time.Time
	applied     *svcstate.Snapshot
	stale       map[string]time.Time // emptied chains, and since when
}

// NewProxier checks cfg and returns a Proxier whose first sync is full.
func NewProxier(cfg ProxierConfig) (*Proxier, error) {
	if err := cfg.Rules.Validate(); err != nil {
		return nil, err
	}
	if cfg.Tracker == nil || cfg.Kernel == nil {
		return nil, fmt.Errorf("nftables: proxier needs a tracker and a kernel")
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
	if cfg.StaleChainDelay <= 0 {
		cfg.StaleChainDelay = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Logger = cfg.Logger.With("proxyMode", "nftables", "ipFamily", string(cfg.Rules.Family))
	return &Proxier{cfg: cfg, fam: cfg.Rules.family(), needFull: true, stale: map[string]time.Time{}}, nil
}

// RequestFullSync makes the next sync rewrite the whole table.
func (p *Proxier) RequestFullSync() {
	p.mu.Lock()
	p.needFull = true
	p.mu.Unlock()
}

// LastSuccess is when the kernel last matched a snapshot.
func (p *Proxier) LastSuccess() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastSuccess
}

// Applied returns the snapshot the table was last built from.
func (p *Proxier) Applied() *svcstate.Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied
}

// Sync brings the kernel in line with the tracker's latest snapshot.
func (p *Proxier) Sync(ctx context.Context) error {
	res, err := p.sync()
	if err == nil && p.cfg.AfterSync != nil && len(res.Changed) > 0 {
		p.cfg.AfterSync(res)
	}
	return err
}

func (p *Proxier) sync() (proxy.SyncResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	start := p.cfg.Now()
	p.deleteStaleChains(start)
	snap, changes := p.cfg.Tracker.Snapshot()
	p.pending.Merge(changes)
	full := p.needFull || p.state == nil || start.Sub(p.lastFull) >= p.cfg.FullSyncPeriod
	if !full && start.Sub(p.lastCanary) >= p.cfg.CanaryPeriod {
		ok, err := p.cfg.Kernel.Reader.Exists()
		if err != nil {
			return proxy.SyncResult{}, p.failed(err)
		}
		p.lastCanary = start
		if !ok {
			p.cfg.Logger.Warn("the nftables table was deleted by someone else; writing it all again")
			full = true
		}
	}
	if !full && len(p.pending.Ports) == 0 {
		p.applied, p.lastSuccess = snap, start
		p.pending = svcstate.Changes{}
		return proxy.SyncResult{}, nil
	}

	in := Input{Snapshot: snap, Changed: p.pending.Ports, Previous: p.state, Full: full}
	tx := nft.NewTx(p.fam, TableName)
	if full {
		exists, err := p.cfg.Kernel.Reader.Exists()
		if err != nil {
			return proxy.SyncResult{}, p.failed(err)
		}
		if exists && p.recreate {
			// The last full sync failed on what is there (a table of the
			// same name with other types, say): start from nothing.
			tx.DeleteTable()
			exists = false
		}
		in.Fresh = !exists
		if exists {
			if in.ExistingChains, err = p.cfg.Kernel.Reader.ChainNames(); err != nil {
				return proxy.SyncResult{}, p.failed(err)
			}
			sets, err := p.cfg.Kernel.Reader.Sets()
			if err != nil {
				return proxy.SyncResult{}, p.failed(err)
			}
			for _, s := range sets {
				in.ExistingSets = append(in.ExistingSets, s.Name)
			}
		}
	}
	plan := Build(p.cfg.Rules, in)
	// Build consumed p.state; until this sync succeeds only a full sync
	// can follow.
	p.state = nil
	plan.AddTo(tx)
	if err := p.cfg.Kernel.Conn.Run(tx); err != nil {
		if full {
			p.recreate = true
		}
		return proxy.SyncResult{}, p.failed(fmt.Errorf("%d messages, %d bytes: %w", tx.Len(), tx.Bytes(), err))
	}

	done := p.cfg.Now()
	res := proxy.SyncResult{Previous: p.applied, Current: snap, Changed: p.pending.Ports}
	p.state, p.applied, p.lastSuccess, p.needFull = plan.State, snap, done, false
	if full {
		p.lastFull, p.lastCanary, p.recreate = done, done, false
		for _, c := range plan.Table.Chains {
			delete(p.stale, c.Name)
		}
		// A full sync of 10,000 services builds a 100 MiB batch and a
		// table of 400,000 rules, all garbage now: give the memory back
		// rather than keep it for the next full sync, an hour away.
		go debug.FreeOSMemory()
	} else {
		for _, c := range plan.NewChains {
			delete(p.stale, c.Name)
		}
	}
	for _, c := range plan.StaleChains {
		if _, ok := p.stale[c]; !ok {
			p.stale[c] = done
		}
	}
	p.logSync(plan, done.Sub(start), tx)
	p.observe(plan, start, done)
	p.pending = svcstate.Changes{}
	return res, nil
}

// deleteStaleChains deletes the chains emptied at least StaleChainDelay
// ago, in a transaction of their own: one the kernel refuses (a chain
// still referenced) must not hold up the sync.
func (p *Proxier) deleteStaleChains(now time.Time) {
	var due []string
	for c, since := range p.stale {
		if now.Sub(since) >= p.cfg.StaleChainDelay {
			due = append(due, c)
		}
	}
	if len(due) == 0 {
		return
	}
	slices.Sort(due)
	tx := nft.NewTx(p.fam, TableName)
	for _, c := range due {
		tx.DeleteChain(c)
	}
	err := p.cfg.Kernel.Conn.Run(tx)
	for _, c := range due {
		delete(p.stale, c)
	}
	if err != nil {
		var nerr *nft.Error
		if errors.As(err, &nerr) && nerr.Errno == syscall.ENOENT {
			return // gone already (the table was deleted): nothing to clean
		}
		// The next full sync finds them again and retries.
		p.cfg.Logger.Warn("cannot delete stale nftables chains; the next full sync retries", "chains", len(due), "err", err)
		if m := p.cfg.Metrics; m != nil {
			m.NFTablesCleanupFailures.Inc()
		}
		p.needFull = true
		return
	}
	p.cfg.Logger.Info("deleted stale nftables chains", "chains", len(due))
}

// failed records a failed sync. The kernel still holds the previous
// table (transactions are atomic), and the next sync is full.
func (p *Proxier) failed(err error) error {
	p.needFull = true
	if m := p.cfg.Metrics; m != nil {
		m.NFTablesSyncFailures.Inc()
	}
	return err
}

// maxLoggedChanges keeps a sync's log line short when thousands of
// services change at once.
const maxLoggedChanges = 10

func (p *Proxier) logSync(plan *Plan, took time.Duration, tx *nft.Tx) {
	ports := slices.SortedFunc(maps.Keys(p.pending.Ports), svcstate.ServicePortName.Compare)
	more := 0
	if len(ports) > maxLoggedChanges {
		more, ports = len(ports)-maxLoggedChanges, ports[:maxLoggedChanges]
	}
	names, reach := make([]string, len(ports)), make([]string, len(ports))
	for i, n := range ports {
		names[i] = n.String() + "/" + strings.ToLower(string(n.Protocol))
		reach[i] = "removed"
		if r, ok := plan.Reachable[n]; ok {
			reach[i] = strconv.Itoa(r)
		}
	}
	p.cfg.Logger.Info("synced nftables rules", "full", plan.Full, "took", took,
		"changed", names, "endpoints", reach, "moreChanged", more, "servicePorts", plan.Stats.ServicePorts,
		"chainsWritten", plan.Stats.ChainsWritten, "elementsWritten", plan.Stats.ElementsWritten,
		"staleChains", plan.Stats.StaleChains, "messages", tx.Len(), "bytes", tx.Bytes())
}

func (p *Proxier) observe(plan *Plan, start, done time.Time) {
	m := p.cfg.Metrics
	if m == nil {
		return
	}
	took := done.Sub(start).Seconds()
	m.SyncDuration.Observe(took)
	if plan.Full {
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
	m.NoLocalEndpoints.WithLabelValues("internal").Set(float64(plan.Stats.NoLocalInternal))
	m.NoLocalEndpoints.WithLabelValues("external").Set(float64(plan.Stats.NoLocalExternal))
	m.ServiceChanges.Add(float64(len(p.pending.Ports)))
	m.EndpointChanges.Add(float64(len(p.pending.Services)))
	m.Services.Set(float64(plan.Stats.ServicePorts))
	m.Endpoints.Set(float64(plan.Stats.Endpoints))
	m.NFTablesElements.Set(float64(plan.Stats.Elements))
}

// Cleanup deletes kube-proxy's nftables tables (both families) from the
// calling thread's network namespace, as `kube-proxy --cleanup` does.
func Cleanup() error {
	c, err := nft.Open()
	if err != nil {
		return err
	}
	defer c.Close()
	var errs []error
	for _, f := range []nft.Family{nft.IPv4, nft.IPv6} {
		r, err := nft.OpenReader(f, TableName)
		if err != nil {
			return err
		}
		ok, err := r.Exists()
		r.Close()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			continue
		}
		tx := nft.NewTx(f, TableName)
		tx.DeleteTable()
		if err := c.Run(tx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
