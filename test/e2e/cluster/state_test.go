package cluster_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The cluster's state as the fault tests (chaos, soak) judge recovery
// by: each check reads the API once and is false when it cannot.

// readyPods: exactly want pods of selector in ns are Ready and not
// being deleted.
func readyPods(client kubernetes.Interface, ns, selector string, want int) func() bool {
	return func() bool {
		pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false
		}
		n := 0
		for _, p := range pods.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					n++
				}
			}
		}
		return n == want
	}
}

// nodeReady: the node's Ready condition is True.
func nodeReady(client kubernetes.Interface, name string) bool {
	n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// containerStarts maps each container of the node's pods to its current
// start (container ID and restart count); empty when the API did not
// answer.
func containerStarts(client kubernetes.Interface, node string) map[string]string {
	out := map[string]string{}
	pods, err := client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return out
	}
	for _, p := range pods.Items {
		for _, st := range p.Status.ContainerStatuses {
			out[p.Namespace+"/"+p.Name+"/"+st.Name] = fmt.Sprintf("%s restarts=%d", st.ContainerID, st.RestartCount)
		}
	}
	return out
}
