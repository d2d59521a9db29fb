package replicaset

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

// fakeClient names objects created with generateName, as the API server does.
func fakeClient(objs ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objs...)
	var n atomic.Int64
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if pod.Name == "" {
			pod.Name = fmt.Sprintf("%s%05d", pod.GenerateName, n.Add(1))
		}
		return false, nil, nil
	})
	return c
}

func replicaSet(replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "default", UID: "rs-uid"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "svcnet/echo"}}}}},
	}
}

func run(t *testing.T, client *fake.Clientset) {
	t.Helper()
	runWith(t, client, New)
}

func runWith(t *testing.T, client *fake.Clientset, newController func(kubernetes.Interface, informers.SharedInformerFactory, record.EventRecorder) *Controller) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := newController(client, factory, record.NewFakeRecorder(100))
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go c.Run(ctx, 2)
}

func pods(t *testing.T, client *fake.Clientset) []corev1.Pod {
	l, err := client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var active []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			active = append(active, p)
		}
	}
	return active
}

func waitPods(t *testing.T, client *fake.Clientset, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(pods(t, client)) == n, nil
	})
	if err != nil {
		t.Fatalf("%d pods, want %d", len(pods(t, client)), n)
	}
	time.Sleep(100 * time.Millisecond) // and no more than that
	if got := len(pods(t, client)); got != n {
		t.Fatalf("%d pods after settling, want %d", got, n)
	}
}

func TestCreatesFromTemplate(t *testing.T) {
	client := fakeClient(replicaSet(3))
	run(t, client)
	waitPods(t, client, 3)
	for _, p := range pods(t, client) {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.UID != "rs-uid" || p.GenerateName != "web-abc-" || p.Labels["app"] != "web" {
			t.Errorf("pod %s: owner %v labels %v", p.Name, ref, p.Labels)
		}
	}
}

func TestDeletesSurplusAndAdopts(t *testing.T) {
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "default", Labels: map[string]string{"app": "web"}}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "default", Labels: map[string]string{"app": "db"}}}
	client := fakeClient(replicaSet(1), orphan, other)
	run(t, client)
	// The orphan matches: it is adopted and is the one pod wanted.
	waitPods(t, client, 2) // orphan + other
	p, err := client.CoreV1().Pods("default").Get(context.Background(), "orphan", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != "rs-uid" {
		t.Errorf("orphan not adopted: %v", p.OwnerReferences)
	}
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	n := 0
	for _, p := range pods(t, client) {
		if sel.Matches(labels.Set(p.Labels)) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d web pods, want the adopted orphan only", n)
	}
}

func TestReplicationController(t *testing.T) {
	rc := &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "rc-uid", Generation: 1},
		Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](2), Selector: map[string]string{"app": "web"},
			Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "1"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "svcnet/echo"}}}}},
	}
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "default", UID: "orphan-uid", Labels: map[string]string{"app": "web"}}}
	// Owned by a ReplicaSet: matching labels do not make it the RC's.
	rsPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rs-pod", Namespace: "default", Labels: map[string]string{"app": "web"},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(replicaSet(1), appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}}}
	client := fakeClient(rc, orphan, rsPod)
	runWith(t, client, NewReplicationManager)
	waitPods(t, client, 3) // the RS's pod, the adopted orphan, one created
	for _, p := range pods(t, client) {
		ref := metav1.GetControllerOf(&p)
		switch {
		case p.Name == "rs-pod":
			if ref.Kind != "ReplicaSet" {
				t.Errorf("the ReplicaSet's pod was taken: %v", p.OwnerReferences)
			}
		case ref == nil || ref.Kind != "ReplicationController" || ref.APIVersion != "v1" || ref.Name != "web" || ref.UID != "rc-uid":
			t.Errorf("pod %s: owner %+v, want the ReplicationController", p.Name, ref)
		case p.Name != "orphan" && (p.GenerateName != "web-" || p.Labels["tier"] != "1"):
			t.Errorf("pod %s not made from the template: %v %v", p.Name, p.GenerateName, p.Labels)
		}
	}
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := client.CoreV1().ReplicationControllers("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && got.Status.Replicas == 2 && got.Status.FullyLabeledReplicas == 1 && got.Status.ObservedGeneration == 1, nil
	})
	if err != nil {
		got, _ := client.CoreV1().ReplicationControllers("default").Get(context.Background(), "web", metav1.GetOptions{})
		t.Errorf("status %+v, want 2 replicas, 1 fully labeled (the orphan lacks tier), generation 1", got.Status)
	}
}

func TestRankForDeletion(t *testing.T) {
	now := metav1.Now()
	mk := func(name, node string, phase corev1.PodPhase, ready bool) *corev1.Pod {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: now}, Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	}
	ps := []*corev1.Pod{
		mk("running-ready", "n", corev1.PodRunning, true),
		mk("running-unready", "n", corev1.PodRunning, false),
		mk("pending", "n", corev1.PodPending, false),
		mk("unscheduled", "", corev1.PodPending, false),
	}
	rankForDeletion(ps)
	want := []string{"unscheduled", "pending", "running-unready", "running-ready"}
	for i, p := range ps {
		if p.Name != want[i] {
			t.Fatalf("order %d: %s, want %s", i, p.Name, want[i])
		}
	}
}
