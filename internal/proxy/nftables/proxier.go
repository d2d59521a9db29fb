package nftables

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime/debug"
	"slices"
	"sync/atomic"
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
	Rules Config
	// Sync is the sync's: a full sync rewrites the whole table, and the
	// canary is the table itself.
	Sync   proxy.SyncerConfig
	Kernel *Kernel
	// StaleChainDelay is how long an emptied chain waits before it is
	// deleted. Default 1s, as kube-proxy.
	StaleChainDelay time.Duration
}

// Proxier keeps kube-proxy's nftables table in line with the tracker's
// snapshots: a proxy.Syncer whose mode writes nf_tables transactions. Its
// Sync is the proxy.SyncFunc of a proxy.Runner.
type Proxier struct {
	*proxy.Syncer
	w *writer
}

// writer is the nftables mode of a Syncer.
type writer struct {
	cfg ProxierConfig
	fam nft.Family
	log *slog.Logger

	state    *State
	recreate bool // the next full sync deletes the table first
	// forceFull makes the next write full: emptied chains could not be
	// deleted, and only a full sync finds them again.
	forceFull bool
	stale     map[string]time.Time // emptied chains, and since when
	// serviceCIDRs, once set, replace cfg.Rules.ServiceCIDRs at the next
	// sync (the ServiceCIDR objects changed).
	serviceCIDRs atomic.Pointer[[]netip.Prefix]
}

// NewProxier checks cfg and returns a Proxier whose first sync is full.
func NewProxier(cfg ProxierConfig) (*Proxier, error) {
	if err := cfg.Rules.Validate(); err != nil {
		return nil, err
	}
	if cfg.Sync.Tracker == nil || cfg.Kernel == nil {
		return nil, fmt.Errorf("nftables: proxier needs a tracker and a kernel")
	}
	cfg.Rules = cfg.Rules.withDefaults()
	if cfg.StaleChainDelay <= 0 {
		cfg.StaleChainDelay = time.Second
	}
	if cfg.Sync.Now == nil {
		cfg.Sync.Now = time.Now
	}
	cfg.Sync.Mode, cfg.Sync.Family = "nftables", cfg.Rules.Family
	w := &writer{cfg: cfg, fam: cfg.Rules.family(), stale: map[string]time.Time{}}
	s := proxy.NewSyncer(cfg.Sync, w)
	w.log = s.Logger()
	return &Proxier{Syncer: s, w: w}, nil
}

// SetServiceCIDRs replaces the service ranges with those of cidrs in the
// proxier's family, as kube-proxy learns them from ServiceCIDR objects,
// and reports whether they changed: then the next sync is a full one
// (it rewrites cluster-ips-check) and the caller should ask for it.
func (p *Proxier) SetServiceCIDRs(cidrs []netip.Prefix) bool {
	var mine []netip.Prefix
	for _, c := range cidrs {
		if c.Addr().Is6() == (p.w.fam == nft.IPv6) {
			mine = append(mine, c.Masked())
		}
	}
	slices.SortFunc(mine, netip.Prefix.Compare)
	mine = slices.Compact(mine)
	old := p.w.serviceCIDRs.Swap(&mine)
	if old == nil {
		return !slices.Equal(mine, p.w.cfg.Rules.ServiceCIDRs)
	}
	return !slices.Equal(mine, *old)
}

// Intact reports whether the table is still there.
func (p *writer) Intact(context.Context) (bool, error) {
	return p.cfg.Kernel.Reader.Exists()
}

// Apply deletes the chains emptied long enough ago, then writes the
// changed services' chains and elements in one transaction, or the whole
// table when w is full.
func (p *writer) Apply(_ context.Context, w proxy.Write) (proxy.Written, error) {
	p.deleteStaleChains(p.cfg.Sync.Now())
	full := w.Full || p.forceFull
	if c := p.serviceCIDRs.Load(); c != nil && !slices.Equal(*c, p.cfg.Rules.ServiceCIDRs) {
		p.cfg.Rules.ServiceCIDRs = *c
		full = true
	}
	if !full && len(w.Changed) == 0 {
		return proxy.Written{Again: len(p.stale) > 0}, nil
	}
	in := Input{Snapshot: w.Snapshot, Changed: w.Changed, Previous: p.state, Full: full}
	tx := nft.NewTx(p.fam, TableName)
	if full {
		exists, err := p.cfg.Kernel.Reader.Exists()
		if err != nil {
			return proxy.Written{}, err
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
				return proxy.Written{}, err
			}
			sets, err := p.cfg.Kernel.Reader.Sets()
			if err != nil {
				return proxy.Written{}, err
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
	// Into no table at all (not one deleted in this transaction), a full
	// sync goes in several transactions: the kernel's cost of binding
	// anonymous maps is quadratic in a transaction's size.
	txs := []*nft.Tx{tx}
	if plan.Fresh && tx.Len() == 0 {
		txs = plan.FreshTxs(p.fam)
	} else {
		plan.AddTo(tx)
	}
	messages, bytes := 0, 0
	for _, t := range txs {
		messages, bytes = messages+t.Len(), bytes+t.Bytes()
		if err := p.cfg.Kernel.Conn.Run(t); err != nil {
			if full {
				p.recreate = true
			}
			return proxy.Written{}, proxy.TransactionFailed(fmt.Errorf("%d transactions, %d messages, %d bytes: %w", len(txs), t.Len(), t.Bytes(), err))
		}
	}

	done := p.cfg.Sync.Now()
	p.state, p.forceFull = plan.State, false
	if full {
		p.recreate = false
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
	if m := p.cfg.Sync.Metrics; m != nil {
		m.NFTablesElements.Set(float64(plan.Stats.Elements))
	}
	st := plan.Stats
	return proxy.Written{
		Full:  plan.Full,
		Again: len(p.stale) > 0,
		Stats: proxy.SyncStats{
			ServicePorts: st.ServicePorts, Endpoints: st.Endpoints,
			NoLocal: map[string]int{"internal": st.NoLocalInternal, "external": st.NoLocalExternal},
		},
		Reachable: func(n svcstate.ServicePortName) (int, bool) {
			r, ok := plan.Reachable[n]
			return r, ok
		},
		Log: []any{"chainsWritten", st.ChainsWritten, "elementsWritten", st.ElementsWritten,
			"staleChains", st.StaleChains, "transactions", len(txs), "messages", messages, "bytes", bytes},
	}, nil
}

// deleteStaleChains deletes the chains emptied at least StaleChainDelay
// ago, in a transaction of their own: one the kernel refuses (a chain
// still referenced) must not hold up the sync.
func (p *writer) deleteStaleChains(now time.Time) {
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
		p.log.Warn("cannot delete stale nftables chains; the next full sync retries", "chains", len(due), "err", err)
		if m := p.cfg.Sync.Metrics; m != nil {
			m.NFTablesCleanupFailures.Inc()
		}
		p.forceFull = true
		return
	}
	p.log.Info("deleted stale nftables chains", "chains", len(due))
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
