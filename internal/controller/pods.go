package controller

import (
	"encoding/json"
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// PodReady reports whether the pod's Ready condition is true.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NodeReady reports whether the node's Ready condition is true.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodRunningAndReady is a pod that serves: Running, Ready and not being
// deleted (what workload controllers wait for before their next step).
func PodRunningAndReady(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && PodReady(p)
}

// OwnerHandler passes the key (namespace/name) of the controller of kind
// (apiVersion, e.g. "apps/v1") of every pod event to enqueue.
func OwnerHandler(apiVersion, kind string, enqueue func(key string)) cache.ResourceEventHandlerFuncs {
	byOwner := func(obj any) {
		pod, ok := As[*corev1.Pod](obj)
		if !ok {
			return
		}
		if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == kind && ref.APIVersion == apiVersion {
			enqueue(pod.Namespace + "/" + ref.Name)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: byOwner, UpdateFunc: func(_, n any) { byOwner(n) }, DeleteFunc: byOwner}
}

// ControlledPods lists the pods of a namespace that match selector and
// that uid controls. ok is false for a selector that cannot be read.
func ControlledPods(pods corelisters.PodLister, namespace string, selector *metav1.LabelSelector, uid types.UID) (out []*corev1.Pod, ok bool, err error) {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, false, nil
	}
	all, err := pods.Pods(namespace).List(sel)
	if err != nil {
		return nil, true, err
	}
	for _, p := range all {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == uid {
			out = append(out, p)
		}
	}
	return out, true, nil
}

// TemplateHash names a pod template: the "8548b869d7" of
// hostnames-8548b869d7-j5lj9 and the controller-revision-hash of
// StatefulSet and DaemonSet pods. The collision count changes it when
// another template hashed the same.
func TemplateHash(t *corev1.PodTemplateSpec, collisions *int32) string {
	h := fnv.New32a()
	data, _ := json.Marshal(t)
	h.Write(data)
	if collisions != nil {
		fmt.Fprintf(h, "%d", *collisions)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}
