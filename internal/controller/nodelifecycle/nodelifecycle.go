// Package nodelifecycle watches nodes' heartbeats, as kube-controller-
// manager's node lifecycle controller does: a node whose agent has posted
// neither a Lease renewal nor a status for the grace period gets its
// conditions set to Unknown and the unreachable taints, and its pods are
// marked not ready, so that they leave every Service's ready endpoints
// and the scheduler stops placing pods there. A node that reports Ready
// again loses the taints. Pods on a node with NoExecute taints are
// evicted (deleted) once they do not tolerate a taint, at once or when
// their tolerationSeconds run out, as kube-controller-manager's taint
// eviction controller does; the API server gives every pod 300 s for the
// not-ready and unreachable taints unless it says otherwise.
package nodelifecycle

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/controller"
)

// Defaults of kube-controller-manager's --node-monitor-grace-period and
// --node-monitor-period.
const (
	DefaultGracePeriod = 50 * time.Second
	DefaultPeriod      = 5 * time.Second
)

// The taints kube-controller-manager puts on nodes by their Ready
// condition.
var (
	unreachable = []corev1.Taint{
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute},
	}
	notReady = []corev1.Taint{
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
	}
)

// Controller is the node lifecycle controller.
type Controller struct {
	client   kubernetes.Interface
	nodes    corelisters.NodeLister
	leases   coordlisters.LeaseLister
	pods     cache.Indexer // by nodeIndex
	recorder record.EventRecorder
	grace    time.Duration
	now      func() time.Time

	mu sync.Mutex
	// probes remembers, per node, the last heartbeat seen and when this
	// controller saw it change, by its own clock: an agent's clock may be
	// off, and after a restart of this controller every node gets the
	// whole grace period again.
	probes map[string]probe
	// tainted remembers when each pod was first seen on a node with each
	// NoExecute taint: tolerationSeconds count from then, as in
	// Kubernetes' taint eviction controller (a taint's timeAdded may be
	// missing, and a pod bound to a node that is tainted already gets its
	// whole toleration).
	tainted map[taintedPod]time.Time
}

type taintedPod struct {
	uid    types.UID
	key    string
	effect corev1.TaintEffect
}

type probe struct {
	heartbeat metav1.Time      // the Ready condition's lastHeartbeatTime
	renew     metav1.MicroTime // the Lease's renewTime
	seen      time.Time
}

// New wires the controller to factory's informers; grace is how long a
// node may stay silent.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, grace time.Duration) *Controller {
	return &Controller{
		client:   client,
		nodes:    factory.Core().V1().Nodes().Lister(),
		leases:   factory.Coordination().V1().Leases().Lister(),
		pods:     podsByNode(factory),
		recorder: recorder,
		grace:    grace,
		now:      time.Now,
		probes:   map[string]probe{},
		tainted:  map[taintedPod]time.Time{},
	}
}

// Run checks every node each period until ctx ends.
func (c *Controller) Run(ctx context.Context, period time.Duration) {
	wait.UntilWithContext(ctx, c.Sync, period)
}

// Sync checks every node once.
func (c *Controller) Sync(ctx context.Context) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	now := c.now()
	names := map[string]bool{}
	seen := map[taintedPod]bool{}
	for _, n := range nodes {
		names[n.Name] = true
		if err := c.check(ctx, n, now, seen); err != nil && ctx.Err() == nil {
			slog.Warn("node lifecycle", "node", n.Name, "err", err)
		}
	}
	c.mu.Lock()
	for n := range c.probes {
		if !names[n] {
			delete(c.probes, n)
		}
	}
	for k := range c.tainted {
		if !seen[k] {
			delete(c.tainted, k)
		}
	}
	c.mu.Unlock()
}

func (c *Controller) check(ctx context.Context, node *corev1.Node, now time.Time, seen map[taintedPod]bool) error {
	var p probe
	if ready := readyCondition(node); ready != nil {
		p.heartbeat = ready.LastHeartbeatTime
	}
	if l, err := c.leases.Leases(corev1.NamespaceNodeLease).Get(node.Name); err == nil && l.Spec.RenewTime != nil {
		p.renew = *l.Spec.RenewTime
	}
	c.mu.Lock()
	old, known := c.probes[node.Name]
	if known && old.heartbeat.Equal(&p.heartbeat) && old.renew.Equal(&p.renew) {
		p.seen = old.seen
	} else {
		p.seen = now
	}
	c.probes[node.Name] = p
	c.mu.Unlock()

	marked := false
	if now.Sub(p.seen) > c.grace {
		var err error
		if marked, err = c.markUnknown(ctx, node, now); err != nil {
			return err
		}
	}
	// The cached node decides whether to write, so that a quiet cluster
	// costs no requests; after marking it the cache is behind.
	taints := node.Spec.Taints
	if marked || !sameTaints(Taints(node, metav1.NewTime(now)), taints) {
		var err error
		if taints, err = c.setTaints(ctx, node.Name); err != nil {
			return err
		}
	}
	return c.evict(ctx, node.Name, taints, now, seen)
}

// evict deletes the pods on the node that do not tolerate its NoExecute
// taints, or whose toleration has run out.
func (c *Controller) evict(ctx context.Context, nodeName string, taints []corev1.Taint, now time.Time, seen map[taintedPod]bool) error {
	if !slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.Effect == corev1.TaintEffectNoExecute }) {
		return nil
	}
	pods, err := c.pods.ByIndex(nodeIndex, nodeName)
	if err != nil {
		return err
	}
	for _, obj := range pods {
		pod := obj.(*corev1.Pod)
		if pod.DeletionTimestamp != nil {
			continue
		}
		since := func(t corev1.Taint) time.Time {
			k := taintedPod{pod.UID, t.Key, t.Effect}
			seen[k] = true
			c.mu.Lock()
			defer c.mu.Unlock()
			first, ok := c.tainted[k]
			if !ok {
				first = now
				c.tainted[k] = now
			}
			return first
		}
		at, ok := EvictionTime(pod, taints, now, since)
		if !ok || now.Before(at) {
			continue
		}
		slog.Info("evicting pod", "pod", pod.Namespace+"/"+pod.Name, "node", nodeName)
		c.recorder.Eventf(pod, corev1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod %s/%s", pod.Namespace, pod.Name)
		err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}

// EvictionTime is when a pod on a node with these taints is to be
// evicted: at once when it does not tolerate one of the NoExecute taints,
// else when the shortest tolerationSeconds among the tolerations that
// match has passed since(taint), when the pod was first seen with the
// taint. ok is false when the pod may stay for good: every matching
// toleration is without tolerationSeconds.
func EvictionTime(pod *corev1.Pod, taints []corev1.Taint, now time.Time, since func(corev1.Taint) time.Time) (at time.Time, ok bool) {
	for _, taint := range taints {
		if taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		start := since(taint)
		var limit *time.Time
		tolerated := false
		for _, tol := range pod.Spec.Tolerations {
			if !tol.ToleratesTaint(klog.Background(), &taint, false) {
				continue
			}
			tolerated = true
			if tol.TolerationSeconds == nil {
				continue // no limit of its own; another toleration's still counts, as in Kubernetes
			}
			t := start.Add(time.Duration(max(0, *tol.TolerationSeconds)) * time.Second)
			if limit == nil || t.Before(*limit) {
				limit = &t
			}
		}
		switch {
		case !tolerated:
			return now, true
		case limit != nil && (!ok || limit.Before(at)):
			at, ok = *limit, true
		}
	}
	return at, ok
}

// markUnknown sets the node's conditions to Unknown, as the node
// lifecycle controller does for a silent kubelet, and its pods not ready.
// It reports whether it changed the node.
func (c *Controller) markUnknown(ctx context.Context, node *corev1.Node, now time.Time) (bool, error) {
	marked := false
	if r := readyCondition(node); r == nil || r.Status != corev1.ConditionUnknown {
		upd := node.DeepCopy()
		upd.Status.Conditions = UnknownConditions(upd.Status.Conditions, metav1.NewTime(now))
		if _, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return false, err
		}
		marked = true
		slog.Info("node stopped posting status", "node", node.Name, "grace", c.grace)
		c.recorder.Eventf(&corev1.ObjectReference{Kind: "Node", Name: node.Name, UID: node.UID}, corev1.EventTypeNormal,
			"NodeNotReady", "Node %s status is now: NodeNotReady", node.Name)
	}
	pods, err := c.pods.ByIndex(nodeIndex, node.Name)
	if err != nil {
		return marked, err
	}
	for _, obj := range pods {
		pod := obj.(*corev1.Pod)
		if !controller.PodReady(pod) {
			continue
		}
		upd := pod.DeepCopy()
		for i := range upd.Status.Conditions {
			if cond := &upd.Status.Conditions[i]; cond.Type == corev1.PodReady {
				cond.Status, cond.LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(now)
			}
		}
		if _, err := c.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return marked, err
		}
		c.recorder.Eventf(pod, corev1.EventTypeWarning, "NodeNotReady", "Node is not ready")
	}
	return marked, nil
}

// UnknownConditions is conds with every condition the kubelet posts set to
// Unknown (and a Ready condition added when there was none); heartbeat
// times stay as the kubelet left them.
func UnknownConditions(conds []corev1.NodeCondition, now metav1.Time) []corev1.NodeCondition {
	out := slices.Clone(conds)
	for _, t := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		i := slices.IndexFunc(out, func(c corev1.NodeCondition) bool { return c.Type == t })
		if i < 0 {
			if t != corev1.NodeReady {
				continue
			}
			out = append(out, corev1.NodeCondition{Type: t})
			i = len(out) - 1
		}
		c := &out[i]
		if c.Status != corev1.ConditionUnknown {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."
	}
	return out
}

// Taints is the node's taints with the not-ready and unreachable taints
// made to match its Ready condition: unreachable for Unknown, not-ready
// for False, neither for True or no condition yet (a node that never
// posts one gets Unknown after the grace period). Other taints are kept.
func Taints(node *corev1.Node, now metav1.Time) []corev1.Taint {
	var want []corev1.Taint
	if r := readyCondition(node); r != nil {
		switch r.Status {
		case corev1.ConditionUnknown:
			want = unreachable
		case corev1.ConditionFalse:
			want = notReady
		}
	}
	var out []corev1.Taint
	for _, t := range node.Spec.Taints {
		if (t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady) && !hasTaint(want, t) {
			continue
		}
		out = append(out, t)
	}
	for _, t := range want {
		if !hasTaint(out, t) {
			if t.Effect == corev1.TaintEffectNoExecute {
				t.TimeAdded = &now
			}
			out = append(out, t)
		}
	}
	return out
}

func hasTaint(ts []corev1.Taint, t corev1.Taint) bool {
	return slices.ContainsFunc(ts, func(o corev1.Taint) bool { return o.Key == t.Key && o.Effect == t.Effect })
}

// setTaints writes the node's taints when its Ready condition calls for
// others, reading the node afresh: the condition may have just changed.
// It returns the node's taints as they now are.
func (c *Controller) setTaints(ctx context.Context, name string) ([]corev1.Taint, error) {
	var taints []corev1.Taint
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				taints = nil
				return nil
			}
			return err
		}
		taints = Taints(node, metav1.NewTime(c.now()))
		if sameTaints(taints, node.Spec.Taints) {
			taints = node.Spec.Taints // with their times
			return nil
		}
		node.Spec.Taints = taints
		_, err = c.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	return taints, err
}

func sameTaints(a, b []corev1.Taint) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(t corev1.Taint) bool { return !hasTaint(b, t) })
}

func readyCondition(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// nodeIndex indexes pods by spec.nodeName: each check looks at one
// node's pods, not every pod of the cluster.
const nodeIndex = "spec.nodeName"

func podsByNode(factory informers.SharedInformerFactory) cache.Indexer {
	inf := factory.Core().V1().Pods().Informer()
	// Only fails once the informer has started; New runs before.
	_ = inf.AddIndexers(cache.Indexers{nodeIndex: func(obj any) ([]string, error) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
			return []string{pod.Spec.NodeName}, nil
		}
		return nil, nil
	}})
	return inf.GetIndexer()
}
