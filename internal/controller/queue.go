// Package controller holds what svcnet's controllers share: a keyed,
// rate-limited work queue with its worker loop, the lookup of a queued
// key, informer-event helpers, create/delete expectations and the writing
// of workload pods. The controllers live in the folders below, one each.
package controller

import (
	"context"
	"log/slog"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// SyncFunc brings one key to its desired state. A returned error retries
// the key with exponential back-off; RequeueAfter asks for another look.
type SyncFunc func(ctx context.Context, key string) (RequeueAfter time.Duration, err error)

// Queue is a deduplicating, rate-limited queue of keys and the workers
// that drain it.
type Queue struct {
	name  string
	queue workqueue.TypedRateLimitingInterface[string]
	sync  SyncFunc
}

// NewQueue returns a queue whose keys sync calls, a failed key retried
// after 5ms, doubling up to 30s.
func NewQueue(name string, sync SyncFunc) *Queue {
	return NewQueueWith(name, workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 30*time.Second), sync)
}

// NewQueueWith returns a queue whose keys sync calls, failed keys retried
// as limiter says.
func NewQueueWith(name string, limiter workqueue.TypedRateLimiter[string], sync SyncFunc) *Queue {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
	return &Queue{name: name, queue: q, sync: sync}
}

// As returns an event handler's object as a T, looking through the
// tombstone a delete delivers when the watch missed the object's end.
func As[T any](obj any) (T, bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	t, ok := obj.(T)
	return t, ok
}

// Add enqueues key.
func (q *Queue) Add(key string) { q.queue.Add(key) }

// Run drains the queue with workers until ctx ends.
func (q *Queue) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	for range workers {
		go q.worker(ctx)
	}
	<-ctx.Done()
	q.queue.ShutDown()
}

func (q *Queue) worker(ctx context.Context) {
	for q.next(ctx) {
	}
}

func (q *Queue) next(ctx context.Context) bool {
	key, quit := q.queue.Get()
	if quit {
		return false
	}
	defer q.queue.Done(key)
	start := time.Now()
	after, err := q.sync(ctx, key)
	observe(q.name, start, err, after > 0, q.queue.Len())
	switch {
	case err != nil:
		if q.queue.NumRequeues(key) < 15 {
			slog.Debug("sync failed, retrying", "controller", q.name, "key", key, "err", err)
		} else {
			slog.Warn("sync keeps failing", "controller", q.name, "key", key, "err", err)
		}
		q.queue.AddRateLimited(key)
	case after > 0:
		q.queue.Forget(key)
		q.queue.AddAfter(key, after)
	default:
		q.queue.Forget(key)
	}
	return true
}

// AddObject enqueues the namespace/name key of an informer object
// (tombstones of missed deletes included).
func (q *Queue) AddObject(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		q.queue.Add(key)
	}
}

// Handler enqueues the key of every added, updated and deleted object.
func (q *Queue) Handler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    q.AddObject,
		UpdateFunc: func(_, obj any) { q.AddObject(obj) },
		DeleteFunc: q.AddObject,
	}
}
