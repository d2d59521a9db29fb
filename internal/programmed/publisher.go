package programmed

import (
	"context"
	"log/slog"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// PublisherConfig configures a Publisher. Zero durations take the
// defaults noted.
type PublisherConfig struct {
	Client kubernetes.Interface
	// Kind is the ConsumerLabel's value ("proxy", "ingress"), Holder the
	// consumer (its node's name, its pod's): the Lease is
	// Namespace/LeaseName(Kind, Holder). Namespace defaults to the
	// package's.
	Kind, Holder, Namespace string
	// Renew is how often the Lease is renewed while Healthy; Duration
	// how long a renewal counts. Defaults 10s and 40s, kubelet's for its
	// node Lease.
	Renew, Duration time.Duration
	// MinInterval is the least time between two writes of a new
	// watermark: the syncs of a busy second become one write. A watermark
	// after a quiet period is written at once. Default 1s: a busy
	// cluster's proxies write at most once a second each.
	MinInterval time.Duration
	// Healthy, if set, says whether the consumer may renew: one that is
	// behind stops renewing and, once its Lease expires, is waited for
	// by no one.
	Healthy func() bool
	// DeleteOnStop removes the Lease when Run ends, for a consumer whose
	// data path ends with it (the ingress's, not a proxy's rules).
	DeleteOnStop bool
	Logger       *slog.Logger
}

// Publisher keeps a consumer's Lease: its watermark and its renewals.
type Publisher struct {
	cfg  PublisherConfig
	name string
	kick chan struct{}

	mu      sync.Mutex
	version uint64
}

// NewPublisher returns a Publisher; Run writes the Lease.
func NewPublisher(cfg PublisherConfig) *Publisher {
	if cfg.Renew <= 0 {
		cfg.Renew = 10 * time.Second
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 40 * time.Second
	}
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Namespace == "" {
		cfg.Namespace = Namespace
	}
	return &Publisher{cfg: cfg, name: LeaseName(cfg.Kind, cfg.Holder), kick: make(chan struct{}, 1)}
}

// Set records a new watermark; it never blocks, and a watermark lower
// than one already set is ignored. A nil Publisher publishes nothing.
func (p *Publisher) Set(v uint64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	moved := v > p.version
	if moved {
		p.version = v
	}
	p.mu.Unlock()
	if moved {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

func (p *Publisher) current() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version
}

// Run writes the Lease until ctx ends: a new watermark soon after Set,
// and a renewal every Renew while healthy. A failed write is retried at
// the next turn. The Lease stays when Run ends (a proxy's rules outlive
// it, and a Lease that is not renewed expires) unless DeleteOnStop.
func (p *Publisher) Run(ctx context.Context) {
	if p == nil {
		return
	}
	if p.cfg.DeleteOnStop {
		defer p.delete()
	}
	var (
		lease     *coordinationv1.Lease
		written   uint64
		lastWrite time.Time // of a new watermark
		renewed   time.Time
		warned    time.Time // the last failed write's warning
	)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-timer.C:
		}
		now := time.Now()
		v := p.current()
		newVersion := v > written && now.Sub(lastWrite) >= p.cfg.MinInterval
		renewDue := now.Sub(renewed) >= p.cfg.Renew
		healthy := p.cfg.Healthy == nil || p.cfg.Healthy()
		if newVersion || (renewDue && healthy) {
			l, err := p.write(ctx, lease, v, healthy)
			if err != nil {
				// Said once a minute at most: a consumer without the
				// rights (an older Role) retries every second.
				if ctx.Err() == nil && now.Sub(warned) >= time.Minute {
					warned = now
					p.cfg.Logger.Warn("could not write the programmed-endpoints Lease; retrying every second", "lease", p.cfg.Namespace+"/"+p.name, "err", err)
				}
				lease = nil // read it again
			} else {
				lease, written = l, v
				if newVersion {
					lastWrite = now
				}
				if healthy {
					renewed = now
				}
			}
		}
		// The next turn: the pending watermark's write or the renewal,
		// whichever comes first; when that is already due, nothing could
		// be written now (the write failed, or the consumer is behind),
		// and the next look is a second away.
		next := renewed.Add(p.cfg.Renew)
		if v > written {
			next = minTime(next, lastWrite.Add(p.cfg.MinInterval))
		}
		if !next.After(now) {
			next = now.Add(time.Second)
		}
		timer.Reset(time.Until(next))
	}
}

// delete removes the Lease, within a few seconds of the end of Run's
// context.
func (p *Publisher) delete() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := p.cfg.Client.CoordinationV1().Leases(p.cfg.Namespace).Delete(ctx, p.name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		p.cfg.Logger.Warn("could not delete the programmed-endpoints Lease; it expires", "lease", p.cfg.Namespace+"/"+p.name, "err", err)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// write updates (or creates) the Lease with watermark v, renewing it
// when renew. cur is the Lease as last written, nil to read it first.
func (p *Publisher) write(ctx context.Context, cur *coordinationv1.Lease, v uint64, renew bool) (*coordinationv1.Lease, error) {
	leases := p.cfg.Client.CoordinationV1().Leases(p.cfg.Namespace)
	cached, create := cur != nil, false
	if cur == nil {
		got, err := leases.Get(ctx, p.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			// A new Lease is acquired and renewed as it is made.
			now := metav1.NewMicroTime(time.Now())
			got = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.cfg.Namespace},
				Spec: coordinationv1.LeaseSpec{AcquireTime: &now, RenewTime: &now}}
			create = true
		case err != nil:
			return nil, err
		}
		cur = got
	}
	l := cur.DeepCopy()
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[ConsumerLabel] = p.cfg.Kind
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[VersionAnnotation] = formatVersion(v)
	l.Spec.HolderIdentity = ptr.To(p.cfg.Holder)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(p.cfg.Duration / time.Second))
	if renew && !create {
		now := metav1.NewMicroTime(time.Now())
		l.Spec.RenewTime = &now
	}
	if create {
		return leases.Create(ctx, l, metav1.CreateOptions{})
	}
	out, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	if cached && (apierrors.IsConflict(err) || apierrors.IsNotFound(err)) {
		// Written or deleted by someone else since (a previous run of
		// this consumer): read it and write once more.
		return p.write(ctx, nil, v, renew)
	}
	return out, err
}
