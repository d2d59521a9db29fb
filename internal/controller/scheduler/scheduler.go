// Package scheduler binds pending pods to nodes, as kube-scheduler does
// for the cases svcnet's cluster needs: only ready, schedulable nodes
// whose labels match the pod's nodeSelector and whose taints it tolerates,
// spreading pods evenly. A pod nothing fits stays Pending with the reason
// in its PodScheduled condition and an event.
package scheduler

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/internal/controller"
)

// Name is the scheduler name pods ask for.
const Name = corev1.DefaultSchedulerName

// Scheduler binds pods.
type Scheduler struct {
	client   kubernetes.Interface
	pods     corelisters.PodLister
	nodes    corelisters.NodeLister
	queue    *controller.Queue
	recorder record.EventRecorder

	mu sync.Mutex
	// assumed holds bindings made but not yet seen in the cache, so two
	// pods in a row count each other.
	assumed map[string]string // pod key -> node
}

// New wires the scheduler to factory's informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *Scheduler {
	s := &Scheduler{
		client:   client,
		pods:     factory.Core().V1().Pods().Lister(),
		nodes:    factory.Core().V1().Nodes().Lister(),
		recorder: recorder,
		assumed:  map[string]string{},
	}
	s.queue = controller.NewQueue("scheduler", s.schedule)
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.podChanged,
		UpdateFunc: func(_, o any) { s.podChanged(o) },
		DeleteFunc: func(o any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(o); err == nil {
				s.forget(key)
			}
		},
	})
	// A node that becomes ready may fit waiting pods.
	_, _ = factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.requeuePending() },
		UpdateFunc: func(_, _ any) { s.requeuePending() },
	})
	return s
}

// Run schedules until ctx ends.
func (s *Scheduler) Run(ctx context.Context, workers int) { s.queue.Run(ctx, workers) }

func pending(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && (pod.Spec.SchedulerName == "" || pod.Spec.SchedulerName == Name) &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

func (s *Scheduler) podChanged(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key := pod.Namespace + "/" + pod.Name
	if pod.Spec.NodeName != "" {
		s.forget(key)
		return
	}
	if pending(pod) {
		s.queue.Add(key)
	}
}

func (s *Scheduler) forget(key string) {
	s.mu.Lock()
	delete(s.assumed, key)
	s.mu.Unlock()
}

func (s *Scheduler) requeuePending() {
	pods, _ := s.pods.List(labels.Everything())
	for _, p := range pods {
		if pending(p) {
			s.queue.Add(p.Namespace + "/" + p.Name)
		}
	}
}

// load counts the running and assumed pods per node.
func (s *Scheduler) load() (map[string]int, map[string][]hostPort) {
	load, used := map[string]int{}, map[string][]hostPort{}
	pods, _ := s.pods.List(labels.Everything())
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			load[p.Spec.NodeName]++
			used[p.Spec.NodeName] = append(used[p.Spec.NodeName], hostPortsOf(p)...)
		}
	}
	s.mu.Lock()
	for key, node := range s.assumed {
		if p, err := s.podByKey(key); err == nil && p.Spec.NodeName == "" {
			load[node]++
			used[node] = append(used[node], hostPortsOf(p)...)
		}
	}
	s.mu.Unlock()
	return load, used
}

func (s *Scheduler) podByKey(key string) (*corev1.Pod, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, err
	}
	return s.pods.Pods(ns).Get(name)
}

func (s *Scheduler) schedule(ctx context.Context, key string) (time.Duration, error) {
	pod, err := s.podByKey(key)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	_, bound := s.assumed[key]
	s.mu.Unlock()
	if !pending(pod) || bound {
		return 0, nil
	}
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		return 0, err
	}
	load, used := s.load()
	node, why := choose(pod, nodes, load, used)
	if node == "" {
		return 10 * time.Second, s.unschedulable(ctx, pod, why)
	}
	s.mu.Lock()
	s.assumed[key] = node
	s.mu.Unlock()
	err = s.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
	if err != nil {
		s.forget(key)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return 0, nil // bound or deleted meanwhile
		}
		return 0, fmt.Errorf("bind %s to %s: %w", key, node, err)
	}
	s.recorder.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s to %s", key, node)
	return 0, nil
}

// unschedulable records why the pod waits, once per distinct reason.
func (s *Scheduler) unschedulable(ctx context.Context, pod *corev1.Pod, why string) error {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message == why {
			return nil
		}
	}
	s.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "%s", why)
	upd := pod.DeepCopy()
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: why, LastTransitionTime: metav1.Now()}
	replaced := false
	for i := range upd.Status.Conditions {
		if upd.Status.Conditions[i].Type == corev1.PodScheduled {
			upd.Status.Conditions[i], replaced = cond, true
		}
	}
	if !replaced {
		upd.Status.Conditions = append(upd.Status.Conditions, cond)
	}
	_, err := s.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
