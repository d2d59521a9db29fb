// Package statefulset runs StatefulSets as kube-controller-manager does:
// pods with stable names (<set>-<ordinal>) and hostnames under the set's
// governing Service (<pod>.<service>.<namespace>.svc), created in order
// and each only once the one before is Running and Ready (OrderedReady),
// or all at once (Parallel), removed from the highest ordinal down, and
// replaced one at a time, highest first, when the template changes.
// Plan is the pure core; the controller applies it.
package statefulset

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
)

// Labels the controller puts on its pods, as Kubernetes'.
const (
	PodNameLabel  = appsv1.StatefulSetPodNameLabel // statefulset.kubernetes.io/pod-name
	PodIndexLabel = appsv1.PodIndexLabel           // apps.kubernetes.io/pod-index
	RevisionLabel = appsv1.ControllerRevisionHashLabelKey
)

// Revision names a template: <set>-<hash>, the controller-revision-hash
// label of the pods made from it.
func Revision(set *appsv1.StatefulSet) string {
	return set.Name + "-" + controller.TemplateHash(&set.Spec.Template, nil)
}

// Ordinal of a pod of the set, or -1 if its name is not <set>-<n>.
func Ordinal(set *appsv1.StatefulSet, pod *corev1.Pod) int {
	s, ok := strings.CutPrefix(pod.Name, set.Name+"-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strconv.Itoa(n) != s {
		return -1
	}
	return n
}

// NewPod is the set's pod of an ordinal at a revision.
func NewPod(set *appsv1.StatefulSet, ordinal int, revision string) *corev1.Pod {
	name := fmt.Sprintf("%s-%d", set.Name, ordinal)
	t := set.Spec.Template.DeepCopy()
	labels := t.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	labels[PodNameLabel] = name
	labels[PodIndexLabel] = strconv.Itoa(ordinal)
	labels[RevisionLabel] = revision
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: set.Namespace, Labels: labels, Annotations: t.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: set.Name, UID: set.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: t.Spec,
	}
	pod.Spec.Hostname = name
	if set.Spec.ServiceName != "" {
		pod.Spec.Subdomain = set.Spec.ServiceName
	}
	return pod
}

// Steps are what a sync does.
type Steps struct {
	Create []*corev1.Pod
	Delete []*corev1.Pod
	Status appsv1.StatefulSetStatus
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}

// Plan decides a sync of set given the pods it owns.
func Plan(set *appsv1.StatefulSet, owned []*corev1.Pod) Steps {
	rev := Revision(set)
	start := 0
	if set.Spec.Ordinals != nil {
		start = int(set.Spec.Ordinals.Start)
	}
	want := int(ptr.Deref(set.Spec.Replicas, 1))
	parallel := set.Spec.PodManagementPolicy == appsv1.ParallelPodManagement

	byOrdinal := map[int]*corev1.Pod{}
	var condemned []*corev1.Pod
	for _, p := range owned {
		o := Ordinal(set, p)
		switch {
		case o < 0:
		case o >= start && o < start+want:
			byOrdinal[o] = p
		default:
			condemned = append(condemned, p)
		}
	}
	sort.Slice(condemned, func(i, j int) bool { return Ordinal(set, condemned[i]) > Ordinal(set, condemned[j]) })

	var st Steps
	st.Status = status(set, owned, rev)
	// blocked: OrderedReady waits for each pod before the next step.
	blocked := false
	for o := start; o < start+want; o++ {
		p := byOrdinal[o]
		switch {
		case p == nil:
			if !blocked {
				st.Create = append(st.Create, NewPod(set, o, rev))
			}
			blocked = blocked || !parallel
		case p.DeletionTimestamp != nil:
			blocked = blocked || !parallel
		case terminal(p):
			// A pod that ended is replaced (its name is reused).
			if !blocked {
				st.Delete = append(st.Delete, p)
			}
			blocked = blocked || !parallel
		case !controller.PodRunningAndReady(p):
			blocked = blocked || !parallel
		}
	}
	if blocked {
		return st
	}
	// Scale down, highest ordinal first, one at a time unless Parallel.
	for _, p := range condemned {
		if p.DeletionTimestamp != nil {
			if !parallel {
				return st
			}
			continue
		}
		st.Delete = append(st.Delete, p)
		if !parallel {
			return st
		}
	}
	if len(condemned) > 0 || len(st.Create) > 0 || len(st.Delete) > 0 {
		return st
	}
	// Rolling update: the highest pod at or above the partition that is
	// not at the new revision goes, once every pod is Running and Ready.
	if set.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType {
		return st
	}
	partition := 0
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		partition = int(*ru.Partition)
	}
	for o := start + want - 1; o >= start+partition; o-- {
		if p := byOrdinal[o]; p != nil && p.Labels[RevisionLabel] != rev {
			st.Delete = append(st.Delete, p)
			return st
		}
	}
	return st
}

func status(set *appsv1.StatefulSet, owned []*corev1.Pod, rev string) appsv1.StatefulSetStatus {
	s := appsv1.StatefulSetStatus{ObservedGeneration: set.Generation, UpdateRevision: rev,
		CurrentRevision: set.Status.CurrentRevision, CollisionCount: set.Status.CollisionCount}
	if s.CurrentRevision == "" {
		s.CurrentRevision = rev
	}
	for _, p := range owned {
		if Ordinal(set, p) < 0 {
			continue
		}
		s.Replicas++
		if controller.PodRunningAndReady(p) {
			s.ReadyReplicas++
			s.AvailableReplicas++
		}
		switch p.Labels[RevisionLabel] {
		case rev:
			s.UpdatedReplicas++
			if s.CurrentRevision == rev {
				s.CurrentReplicas++
			}
		case s.CurrentRevision:
			s.CurrentReplicas++
		}
	}
	// The update is complete when every wanted pod is at the new revision.
	if want := ptr.Deref(set.Spec.Replicas, 1); s.UpdatedReplicas == want && s.Replicas == want {
		s.CurrentRevision, s.CurrentReplicas = rev, s.UpdatedReplicas
	}
	return s
}
