package podgc

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// TestCollect: pods of a node that is gone go once the quarantine has
// passed, never before; pods of existing nodes and pending pods stay;
// an unscheduled pod being deleted goes at once.
func TestCollect(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pod := func(name, node string, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			p.Finalizers = []string{"example.com/hold"} // what keeps a deleting pod in the fake tracker
		}
		return p
	}
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "here"}},
		pod("on-here", "here", false), pod("on-gone-1", "gone", false), pod("on-gone-2", "gone", false),
		pod("pending", "", false), pod("never-scheduled", "", true))
	factory := informers.NewSharedInformerFactory(client, 0)
	const quarantine = 40 * time.Second
	c := New(client, factory, quarantine, 0)
	clock := time.Now()
	c.now = func() time.Time { return clock }
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	steps := []struct {
		after time.Duration
		want  []string
	}{
		{0, []string{"on-gone-1", "on-gone-2", "on-here", "pending"}},
		{quarantine - time.Second, []string{"on-gone-1", "on-gone-2", "on-here", "pending"}},
		{quarantine, []string{"on-here", "pending"}},
	}
	start := clock
	for _, s := range steps {
		clock = start.Add(s.after)
		c.Sync(ctx)
		if got := podNames(t, client); !slices.Equal(got, s.want) {
			t.Fatalf("after %s: pods %v, want %v", s.after, got, s.want)
		}
	}
}

// TestTerminatedThreshold: beyond the threshold, the oldest terminated
// pods go; running pods and the newest terminated ones stay.
func TestTerminatedThreshold(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := time.Now().Add(-time.Hour)
	pod := func(name string, age int, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, CreationTimestamp: metav1.NewTime(base.Add(time.Duration(age) * time.Minute))},
			Spec: corev1.PodSpec{NodeName: "here"}, Status: corev1.PodStatus{Phase: phase}}
	}
	objs := []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "here"}},
		pod("done-1", 1, corev1.PodSucceeded), pod("failed-2", 2, corev1.PodFailed), pod("done-3", 3, corev1.PodSucceeded),
		pod("done-4", 4, corev1.PodSucceeded), pod("running-0", 0, corev1.PodRunning)}
	cases := []struct {
		threshold int
		want      []string
	}{
		{0, []string{"done-1", "done-3", "done-4", "failed-2", "running-0"}},
		{4, []string{"done-1", "done-3", "done-4", "failed-2", "running-0"}},
		{2, []string{"done-3", "done-4", "running-0"}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.threshold), func(t *testing.T) {
			client := fake.NewClientset(objs...)
			factory := informers.NewSharedInformerFactory(client, 0)
			c := New(client, factory, DefaultQuarantine, tc.threshold)
			factory.Start(ctx.Done())
			factory.WaitForCacheSync(ctx.Done())
			c.Sync(ctx)
			if names := podNames(t, client); !slices.Equal(names, tc.want) {
				t.Errorf("pods %v, want %v", names, tc.want)
			}
		})
	}
}

// podNames lists the pods left in namespace default, sorted.
func podNames(t *testing.T, client *fake.Clientset) []string {
	t.Helper()
	l, err := client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range l.Items {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}
