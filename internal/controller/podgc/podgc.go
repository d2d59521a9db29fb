// Package podgc deletes pods no node will ever finish, as kube-controller-
// manager's pod garbage collector does: pods bound to a node that no
// longer exists (after a quarantine, and only once the API server
// confirms the node is gone, so that a node being re-registered or a
// stale cache does not cost its pods) and terminating pods that were
// never scheduled. Both are deleted at once (grace period 0): no agent
// is there to stop their containers. Past a threshold of terminated
// (Succeeded or Failed) pods, the oldest are deleted too.
package podgc

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// Kubernetes' figures: a check every 20 s, a missing node must stay
// missing for 40 s.
const (
	DefaultPeriod     = 20 * time.Second
	DefaultQuarantine = 40 * time.Second
	// DefaultTerminatedThreshold is kube-controller-manager's
	// --terminated-pod-gc-threshold.
	DefaultTerminatedThreshold = 12500
)

// Controller is the pod garbage collector.
type Controller struct {
	client     kubernetes.Interface
	pods       corelisters.PodLister
	nodes      corelisters.NodeLister
	quarantine time.Duration
	// terminated is how many terminated pods may stay; 0 or less keeps
	// them all.
	terminated int
	now        func() time.Time

	mu      sync.Mutex
	missing map[string]time.Time // node name -> first seen missing
}

// New wires the collector to factory's informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, quarantine time.Duration, terminatedThreshold int) *Controller {
	return &Controller{
		client:     client,
		pods:       factory.Core().V1().Pods().Lister(),
		nodes:      factory.Core().V1().Nodes().Lister(),
		quarantine: quarantine,
		terminated: terminatedThreshold,
		now:        time.Now,
		missing:    map[string]time.Time{},
	}
}

// Run collects every period until ctx ends.
func (c *Controller) Run(ctx context.Context, period time.Duration) {
	wait.UntilWithContext(ctx, c.Sync, period)
}

// Sync collects once.
func (c *Controller) Sync(ctx context.Context) {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return
	}
	now := c.now()
	gone := map[string]bool{} // node -> confirmed gone past the quarantine
	stillMissing := map[string]bool{}
	for _, pod := range pods {
		node := pod.Spec.NodeName
		switch {
		case node == "" && pod.DeletionTimestamp != nil:
			c.delete(ctx, pod, "unscheduled and terminating")
		case node != "":
			if _, err := c.nodes.Get(node); err == nil {
				continue
			}
			stillMissing[node] = true
			if _, checked := gone[node]; !checked {
				gone[node] = c.confirmGone(ctx, node, now)
			}
			if gone[node] {
				c.delete(ctx, pod, "bound to node "+node+", which no longer exists")
			}
		}
	}
	c.collectTerminated(ctx, pods)
	c.mu.Lock()
	for n := range c.missing {
		if !stillMissing[n] {
			delete(c.missing, n)
		}
	}
	c.mu.Unlock()
}

// confirmGone reports whether node has been missing from the cache for
// the quarantine and the API server says it does not exist.
func (c *Controller) confirmGone(ctx context.Context, node string, now time.Time) bool {
	c.mu.Lock()
	first, ok := c.missing[node]
	if !ok {
		c.missing[node] = now
		first = now
	}
	c.mu.Unlock()
	if now.Sub(first) < c.quarantine {
		return false
	}
	_, err := c.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

func (c *Controller) delete(ctx context.Context, pod *corev1.Pod, why string) {
	slog.Info("deleting pod", "pod", pod.Namespace+"/"+pod.Name, "why", why)
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
		slog.Warn("pod gc", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
}

// collectTerminated deletes the oldest terminated pods beyond the
// threshold.
func (c *Controller) collectTerminated(ctx context.Context, pods []*corev1.Pod) {
	if c.terminated <= 0 {
		return
	}
	var done []*corev1.Pod
	for _, p := range pods {
		if (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) && p.DeletionTimestamp == nil {
			done = append(done, p)
		}
	}
	if len(done) <= c.terminated {
		return
	}
	slices.SortFunc(done, func(a, b *corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for _, p := range done[:len(done)-c.terminated] {
		c.delete(ctx, p, "terminated, beyond the threshold of terminated pods")
	}
}
