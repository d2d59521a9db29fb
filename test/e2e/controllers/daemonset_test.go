package controllers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

// TestDaemonSetFollowsNodes: a DaemonSet runs one pod on every node its
// nodeSelector matches and none elsewhere, following nodes as they are
// labelled, join and leave; a template change replaces every pod, and
// the status counts what runs.
func TestDaemonSetFollowsNodes(t *testing.T) {
	c := startCluster(t)
	ctx := framework.Context(t, 3*time.Minute)
	const key = "svcnet.dev/agent"
	label := func(node string, on bool) {
		t.Helper()
		v := any(nil)
		if on {
			v = "yes"
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: v}}})
		if _, err := c.client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{key: "yes"},
					Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
			},
		},
	}
	label("node-1", true)
	if _, err := c.client.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// placement is the nodes of the set's live pods, sorted, with the
	// pods' revisions.
	placement := func(ctx context.Context) ([]string, map[string]bool, error) {
		pods, err := c.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=agent"})
		if err != nil {
			return nil, nil, err
		}
		var nodes []string
		revs := map[string]bool{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				nodes = append(nodes, p.Spec.NodeName)
				revs[p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]] = true
			}
		}
		slices.Sort(nodes)
		return nodes, revs, nil
	}
	expect := func(what string, want ...string) {
		t.Helper()
		until(t, what, 30*time.Second, func(ctx context.Context) (bool, error) {
			nodes, _, err := placement(ctx)
			if err != nil {
				return false, err
			}
			if !slices.Equal(nodes, want) {
				return false, fmt.Errorf("pods on %v, want %v", nodes, want)
			}
			d, err := c.client.AppsV1().DaemonSets("default").Get(ctx, "agent", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			st := d.Status
			if int(st.DesiredNumberScheduled) != len(want) || int(st.CurrentNumberScheduled) != len(want) || int(st.NumberReady) != len(want) || st.NumberMisscheduled != 0 {
				return false, fmt.Errorf("status %+v, want %d of everything", st, len(want))
			}
			return true, nil
		})
	}
	expect("a pod on node-1 only", "node-1")
	label("node-2", true)
	expect("a pod on node-2 once labelled", "node-1", "node-2")
	if err := c.kubelet.AddNode(ctx, "node-3"); err != nil {
		t.Fatal(err)
	}
	// For two seconds, nothing may land on the unlabelled node.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if nodes, _, err := placement(ctx); err == nil && slices.Contains(nodes, "node-3") {
			t.Fatalf("a pod on node-3, which the nodeSelector does not match: %v", nodes)
		}
	}
	expect("nothing on node-3, unlabelled", "node-1", "node-2")
	label("node-3", true)
	expect("a pod on node-3, joined and labelled", "node-1", "node-2", "node-3")
	label("node-1", false)
	expect("node-1's pod gone with its label", "node-2", "node-3")
	if err := c.client.CoreV1().Nodes().Delete(ctx, "node-3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("node-3's pod gone with the node", "node-2")

	// A new template: every pod replaced by one of the new revision.
	_, before, _ := placement(ctx)
	d, err := c.client.AppsV1().DaemonSets("default").Get(ctx, "agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "ROLLED", Value: "1"}}
	if _, err := c.client.AppsV1().DaemonSets("default").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "the pod replaced by the new template's", 30*time.Second, func(ctx context.Context) (bool, error) {
		nodes, revs, err := placement(ctx)
		if err != nil {
			return false, err
		}
		for r := range revs {
			if before[r] {
				return false, fmt.Errorf("revision %s still runs", r)
			}
		}
		d, err := c.client.AppsV1().DaemonSets("default").Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return slices.Equal(nodes, []string{"node-2"}) && len(revs) == 1 && d.Status.ObservedGeneration >= d.Generation &&
			d.Status.UpdatedNumberScheduled == 1 && d.Status.NumberReady == 1, nil
	})
}
