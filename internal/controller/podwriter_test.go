package controller

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

func testPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
}

func TestPodWriterCreateExpected(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).Name == "b" {
			return true, nil, errors.New("quota")
		}
		return false, nil, nil
	})
	rec := record.NewFakeRecorder(10)
	expect := NewExpectations()
	w := PodWriter{Client: client, Recorder: rec}
	owner := testPod("owner")
	failed, err := w.CreateExpected(context.Background(), expect, "ns/owner", owner,
		[]*corev1.Pod{testPod("a"), testPod("b"), testPod("c")}, func(p *corev1.Pod) string { return "made " + p.Name })
	if err == nil || failed == nil || failed.Name != "b" {
		t.Fatalf("failed %v, err %v; want pod b and its error", failed, err)
	}
	// a was created but not yet seen; b and c never come.
	if expect.Satisfied("ns/owner") {
		t.Error("satisfied before the created pod was seen")
	}
	expect.CreationObserved("ns/owner")
	if !expect.Satisfied("ns/owner") {
		t.Error("still expecting the creations that failed or never ran")
	}
	for _, want := range []string{"Normal SuccessfulCreate made a", "Warning FailedCreate Error creating: quota"} {
		if got := <-rec.Events; got != want {
			t.Errorf("event %q, want %q", got, want)
		}
	}
	if len(rec.Events) != 0 {
		t.Errorf("%d more events", len(rec.Events))
	}
}

func TestPodWriterDelete(t *testing.T) {
	client := fake.NewClientset(testPod("a"), testPod("b"))
	rec := record.NewFakeRecorder(10)
	w := PodWriter{Client: client, Recorder: rec}
	// gone is already deleted: no error, and its event as for the others.
	err := w.Delete(context.Background(), testPod("owner"), []*corev1.Pod{testPod("a"), testPod("gone")},
		func(p *corev1.Pod) string { return "removed " + p.Name })
	if err != nil {
		t.Fatal(err)
	}
	left, _ := client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	if len(left.Items) != 1 || left.Items[0].Name != "b" {
		t.Errorf("left %v, want b only", left.Items)
	}
	for _, want := range []string{"Normal SuccessfulDelete removed a", "Normal SuccessfulDelete removed gone"} {
		if got := <-rec.Events; got != want {
			t.Errorf("event %q, want %q", got, want)
		}
	}
	client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("unavailable")
	})
	if err := w.Delete(context.Background(), testPod("owner"), []*corev1.Pod{testPod("b")}, func(*corev1.Pod) string { return "" }); err == nil {
		t.Error("a failed deletion returned no error")
	}
}
