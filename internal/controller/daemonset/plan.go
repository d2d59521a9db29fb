// Package daemonset runs DaemonSets as kube-controller-manager does: one
// pod of the template on every node it fits (nodeSelector, taints with
// the DaemonSet tolerations), none elsewhere, and a rolling update node
// by node within maxUnavailable. Plan is the pure core.
package daemonset

import (
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/scheduler"
)

// Revision is the controller-revision-hash of the template.
func Revision(ds *appsv1.DaemonSet) string {
	return controller.TemplateHash(&ds.Spec.Template, nil)
}

// tolerations every DaemonSet pod gets, as Kubernetes adds them.
var tolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// NewPod is the set's pod for a node, bound to it.
func NewPod(ds *appsv1.DaemonSet, node string) *corev1.Pod {
	t := ds.Spec.Template.DeepCopy()
	labels := t.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	labels[appsv1.DefaultDaemonSetUniqueLabelKey] = Revision(ds)
	labels["pod-template-generation"] = strconv.FormatInt(ds.Generation, 10)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: ds.Name + "-", Namespace: ds.Namespace, Labels: labels, Annotations: t.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: t.Spec,
	}
	pod.Spec.NodeName = node
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, tolerations...)
	return pod
}

// Steps are what a sync does.
type Steps struct {
	Create []*corev1.Pod
	Delete []*corev1.Pod
	Status appsv1.DaemonSetStatus
}

// Plan decides a sync of ds given the nodes and the pods it owns.
func Plan(ds *appsv1.DaemonSet, nodes []*corev1.Node, owned []*corev1.Pod) Steps {
	rev := Revision(ds)
	byNode := map[string][]*corev1.Pod{}
	for _, p := range owned {
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	var st Steps
	s := &st.Status
	s.ObservedGeneration = ds.Generation
	s.CollisionCount = ds.Status.CollisionCount
	var old []*corev1.Pod // pods of an older template on nodes where they belong
	unavailable := 0
	eligible := map[string]bool{}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		pods := byNode[n.Name]
		sort.Slice(pods, func(i, j int) bool { return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp) })
		if scheduler.Fit(NewPod(ds, n.Name), n) != "" {
			for _, p := range pods {
				if p.DeletionTimestamp == nil {
					s.NumberMisscheduled++
					st.Delete = append(st.Delete, p)
				}
			}
			continue
		}
		eligible[n.Name] = true
		s.DesiredNumberScheduled++
		var live []*corev1.Pod
		for _, p := range pods {
			switch {
			case p.DeletionTimestamp != nil:
			case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
				st.Delete = append(st.Delete, p) // replaced next time
			default:
				live = append(live, p)
			}
		}
		if len(live) == 0 {
			unavailable++
			if len(pods) == 0 {
				st.Create = append(st.Create, NewPod(ds, n.Name))
			}
			continue
		}
		// One per node: the oldest stays.
		st.Delete = append(st.Delete, live[1:]...)
		p := live[0]
		s.CurrentNumberScheduled++
		if controller.PodRunningAndReady(p) {
			s.NumberReady++
			s.NumberAvailable++
		} else {
			unavailable++
		}
		if p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == rev {
			s.UpdatedNumberScheduled++
		} else {
			old = append(old, p)
		}
	}
	for node, pods := range byNode {
		if _, known := eligible[node]; known {
			continue
		}
		if !nodeExists(nodes, node) {
			for _, p := range pods {
				if p.DeletionTimestamp == nil {
					st.Delete = append(st.Delete, p)
				}
			}
		}
	}
	s.NumberUnavailable = int32(unavailable)
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || len(old) == 0 {
		return st
	}
	maxUnavailable := 1
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		v, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, int(s.DesiredNumberScheduled), true)
		if err == nil {
			maxUnavailable = max(v, 1)
		}
	}
	// Old pods that are not ready go first: they cost no availability.
	sort.SliceStable(old, func(i, j int) bool {
		return !controller.PodRunningAndReady(old[i]) && controller.PodRunningAndReady(old[j])
	})
	for _, p := range old {
		if controller.PodRunningAndReady(p) {
			if unavailable >= maxUnavailable {
				break
			}
			unavailable++
		}
		st.Delete = append(st.Delete, p)
	}
	return st
}

func nodeExists(nodes []*corev1.Node, name string) bool {
	for _, n := range nodes {
		if n.Name == name {
			return true
		}
	}
	return false
}
