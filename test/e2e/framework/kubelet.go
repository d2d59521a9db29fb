package framework

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/svcnet/svcnet/internal/controller"
)

// HollowKubelet stands in for node agents in controller tests: it
// registers ready Nodes, renews their Leases, moves every pod bound to
// them to Running with an address, Ready unless the test says otherwise
// (and back to that when something else changed it, as a kubelet's
// status manager does), and finishes graceful deletions at once (or when
// told). It does not run anything.
type HollowKubelet struct {
	t       testing.TB
	client  kubernetes.Interface
	pods    cache.Store
	mu      sync.Mutex
	unready map[string]bool // pod name -> keep unready
	hold    bool            // do not finish graceful deletions
	silent  map[string]bool // node -> posts nothing, as a dead agent
	nextIP  map[string]int
	nodes   map[string]int
}

// leaseRenewal is how often the hollow kubelet renews its nodes' Leases
// (a real one: every 10 s); tests shorten the grace period to match.
const leaseRenewal = time.Second

// StartHollowKubelet registers the nodes and runs until the test ends.
func StartHollowKubelet(t testing.TB, client kubernetes.Interface, nodes ...string) *HollowKubelet {
	t.Helper()
	k := &HollowKubelet{t: t, client: client, unready: map[string]bool{}, silent: map[string]bool{}, nextIP: map[string]int{}, nodes: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, n := range nodes {
		if err := k.AddNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	go k.renewLeases(ctx)
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Core().V1().Pods().Informer()
	k.pods = inf.GetStore()
	work := make(chan *corev1.Pod, 4096)
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { work <- o.(*corev1.Pod) },
		UpdateFunc: func(_, o any) { work <- o.(*corev1.Pod) },
	})
	factory.Start(ctx.Done())
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case pod := <-work:
				k.handle(ctx, pod)
			}
		}
	}()
	return k
}

// AddNode registers one more ready node, as a node joining the cluster;
// the hollow kubelet serves it from then on.
func (k *HollowKubelet) AddNode(ctx context.Context, n string) error {
	k.mu.Lock()
	i := len(k.nodes) + 1
	k.nodes[n] = i
	k.mu.Unlock()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/hostname": n}},
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.244.%d.0/24", i)},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.168.77.%d", i)}}}}
	if _, err := k.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("register node %s: %w", n, err)
	}
	return nil
}

// SetReady makes a pod pass or fail its readiness from now on.
func (k *HollowKubelet) SetReady(ctx context.Context, ns, name string, ready bool) error {
	k.mu.Lock()
	k.unready[name] = !ready
	k.mu.Unlock()
	pod, err := k.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return k.writeStatus(ctx, pod)
}

// HoldDeletions keeps terminating pods until FinishDeletions.
func (k *HollowKubelet) HoldDeletions(hold bool) {
	k.mu.Lock()
	k.hold = hold
	k.mu.Unlock()
}

// FinishDeletion deletes a terminating pod for good, as a node agent does
// once its containers stopped.
func (k *HollowKubelet) FinishDeletion(ctx context.Context, ns, name string) error {
	err := k.client.CoreV1().Pods(ns).Delete(ctx, name, *metav1.NewDeleteOptions(0))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Silence makes a node's agent fall silent (no Lease renewals, no
// statuses), as when it dies, or speak again: then it posts the node
// Ready and puts its pods' readiness back.
func (k *HollowKubelet) Silence(ctx context.Context, node string, silent bool) error {
	k.mu.Lock()
	k.silent[node] = silent
	k.mu.Unlock()
	if silent {
		return nil
	}
	if err := k.renew(ctx, node); err != nil {
		return err
	}
	for _, o := range k.pods.List() {
		k.handle(ctx, o.(*corev1.Pod))
	}
	return nil
}

func (k *HollowKubelet) renewLeases(ctx context.Context) {
	tick := time.NewTicker(leaseRenewal)
	defer tick.Stop()
	for {
		k.mu.Lock()
		names := slices.Collect(maps.Keys(k.nodes))
		k.mu.Unlock()
		for _, n := range names {
			k.mu.Lock()
			silent := k.silent[n]
			k.mu.Unlock()
			if !silent {
				if err := k.renew(ctx, n); err != nil && ctx.Err() == nil {
					k.t.Logf("hollow kubelet: lease of %s: %v", n, err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// renew renews the node's Lease and, when the API's copy of the node is
// not Ready (the node lifecycle controller marked it while it was silent,
// or a slow renewal made it think so), posts Ready, as node agents do.
func (k *HollowKubelet) renew(ctx context.Context, node string) error {
	if err := k.renewLease(ctx, node); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := k.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil // deleted by the test
		}
		if err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		now := metav1.Now()
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
		_, err = k.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

func (k *HollowKubelet) renewLease(ctx context.Context, node string) error {
	leases := k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: corev1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &node, RenewTime: &now}}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

func (k *HollowKubelet) handle(ctx context.Context, pod *corev1.Pod) {
	k.mu.Lock()
	_, mine := k.nodes[pod.Spec.NodeName]
	k.mu.Unlock()
	if !mine {
		return
	}
	k.mu.Lock()
	hold, silent, wantReady := k.hold, k.silent[pod.Spec.NodeName], !k.unready[pod.Name]
	k.mu.Unlock()
	if silent {
		return
	}
	if pod.DeletionTimestamp != nil {
		if !hold {
			_ = k.FinishDeletion(ctx, pod.Namespace, pod.Name)
		}
		return
	}
	if pod.Status.Phase == corev1.PodRunning && controller.PodReady(pod) == wantReady {
		return
	}
	if err := k.writeStatus(ctx, pod); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		k.t.Logf("hollow kubelet: status of %s: %v", pod.Name, err)
	}
}

func (k *HollowKubelet) writeStatus(ctx context.Context, pod *corev1.Pod) error {
	k.mu.Lock()
	ready := !k.unready[pod.Name]
	ip := pod.Status.PodIP
	if ip == "" {
		k.nextIP[pod.Spec.NodeName]++
		n := k.nextIP[pod.Spec.NodeName]
		ip = fmt.Sprintf("10.%d.%d.%d", 100+k.nodes[pod.Spec.NodeName], n/250, n%250+2)
	}
	hostIP := fmt.Sprintf("192.168.77.%d", k.nodes[pod.Spec.NodeName])
	k.mu.Unlock()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	now := metav1.NewTime(time.Now())
	upd := pod.DeepCopy()
	upd.Status.Phase = corev1.PodRunning
	upd.Status.PodIP = ip
	upd.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	upd.Status.HostIP = hostIP
	upd.Status.StartTime = &now
	upd.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
	}
	_, err := k.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	return err
}
