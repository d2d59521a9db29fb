package programmed

import (
	"context"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Waiter watches the consumers' Leases in every namespace (a node
// agent's: one small object per consumer, written when its watermark
// moves) and waits for watermarks.
type Waiter struct {
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	now      func() time.Time

	mu      sync.Mutex
	changed chan struct{} // closed at the next event
}

// NewWaiter returns a Waiter; Start starts its watch.
func NewWaiter(client kubernetes.Interface) *Waiter {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = ConsumerLabel }))
	w := &Waiter{factory: f, informer: f.Coordination().V1().Leases().Informer(), now: time.Now, changed: make(chan struct{})}
	// Any event may end a wait; the waiters read the store again.
	_, _ = w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.signal() },
		UpdateFunc: func(any, any) { w.signal() },
		DeleteFunc: func(any) { w.signal() },
	})
	return w
}

// Start watches the Leases until ctx ends.
func (w *Waiter) Start(ctx context.Context) { w.factory.Start(ctx.Done()) }

func (w *Waiter) signal() {
	w.mu.Lock()
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
}

func (w *Waiter) next() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// Outcome is what a wait found.
type Outcome struct {
	// Consumers counts the live consumers (Lease not expired) at the end.
	Consumers int
	// Behind names the live consumers still below the target when the
	// wait ended early (ctx): empty when every one had reached it.
	Behind []string
}

// Done says whether every live consumer reached the target.
func (o Outcome) Done() bool { return len(o.Behind) == 0 }

// Wait returns once every consumer whose Lease is live has a watermark
// of at least target, or when ctx ends. A consumer whose Lease expires
// meanwhile (gone silent, or behind and so no longer renewing) stops
// counting then. With no consumer at all it returns at once.
func (w *Waiter) Wait(ctx context.Context, target uint64) Outcome {
	if !cache.WaitForCacheSync(ctx.Done(), w.informer.HasSynced) {
		return Outcome{Behind: []string{"(the consumers' Leases could not be read)"}}
	}
	for {
		changed := w.next()
		o, expiry := w.check(target)
		if o.Done() {
			return o
		}
		// Behind consumers have a live Lease, so expiry is set: the
		// first of them to expire ends this turn if nothing else does.
		t := time.NewTimer(max(expiry.Sub(w.now()), 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return o
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// check reads the store: who is behind target, and when the first of
// them expires.
func (w *Waiter) check(target uint64) (Outcome, time.Time) {
	var (
		o     Outcome
		first time.Time
	)
	now := w.now()
	for _, obj := range w.informer.GetStore().List() {
		l, ok := obj.(*coordinationv1.Lease)
		if !ok {
			continue
		}
		exp := Expiry(l)
		if !exp.After(now) {
			continue
		}
		o.Consumers++
		if v, _ := Version(l); v >= target {
			continue
		}
		o.Behind = append(o.Behind, l.Namespace+"/"+l.Name)
		if first.IsZero() || exp.Before(first) {
			first = exp
		}
	}
	slices.Sort(o.Behind)
	return o, first
}
