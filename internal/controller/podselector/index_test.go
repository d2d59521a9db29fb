package podselector

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func pod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels}}
}

func svc(name string, sel map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.ServiceSpec{Selector: sel}}
}

func names(ps []*corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

func TestIndex(t *testing.T) {
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	x := New(corelisters.NewPodLister(store))
	put := func(p *corev1.Pod) []string {
		_ = store.Update(p)
		got := x.SetPod(p)
		sort.Strings(got)
		return got
	}
	put(pod("a1", map[string]string{"app": "a"}))
	x.SetService(svc("a", map[string]string{"app": "a"})) // finds the existing pod
	x.SetService(svc("nosel", nil))
	if got := names(x.Pods("ns", "a")); len(got) != 1 || got[0] != "a1" {
		t.Fatalf("pods of a: %v", got)
	}
	if got := put(pod("a2", map[string]string{"app": "a"})); len(got) != 1 || got[0] != "ns/a" {
		t.Errorf("new pod affects %v", got)
	}
	x.SetService(svc("b", map[string]string{"tier": "web"}))
	// Relabeling moves a pod from a to b: both are affected.
	if got := put(pod("a2", map[string]string{"tier": "web"})); len(got) != 2 {
		t.Errorf("relabel affects %v, want both", got)
	}
	if got := names(x.Pods("ns", "a")); len(got) != 1 {
		t.Errorf("a after relabel: %v", got)
	}
	if got := names(x.Pods("ns", "b")); len(got) != 1 || got[0] != "a2" {
		t.Errorf("b after relabel: %v", got)
	}
	// A selector change recomputes membership.
	x.SetService(svc("b", map[string]string{"app": "a"}))
	if got := names(x.Pods("ns", "b")); len(got) != 1 || got[0] != "a1" {
		t.Errorf("b after selector change: %v", got)
	}
	if got := x.DeletePod(pod("a1", nil)); len(got) != 2 {
		t.Errorf("delete affects %v", got)
	}
	x.DeleteService("ns", "b")
	if got := x.Pods("ns", "b"); len(got) != 0 {
		t.Errorf("deleted service has pods %v", names(got))
	}
	if got := x.Pods("ns", "nosel"); len(got) != 0 {
		t.Errorf("selector-less service has pods %v", names(got))
	}
}

// TestHasSyncedMeansComplete: once HasSynced says so, a Service's pods
// are all in the index — not merely in the informer's store, which is
// synced before its handlers have run. Slow pod handling (a loaded
// machine) is what made a restarted controller manager write endpoint
// slices without some pods.
func TestHasSyncedMeansComplete(t *testing.T) {
	const n = 500
	var objs []runtime.Object
	objs = append(objs, svc("web", map[string]string{"app": "web"}))
	for i := range n {
		objs = append(objs, pod(fmt.Sprintf("web-%d", i), map[string]string{"app": "web"}))
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	pods, svcs := factory.Core().V1().Pods().Informer(), factory.Core().V1().Services().Informer()
	x := New(factory.Core().V1().Pods().Lister())
	// The index's handlers are slowed by their callback, as by a loaded
	// machine: the store syncs long before they are through.
	if err := x.Register(svcs, pods, func(string) { time.Sleep(100 * time.Microsecond) }); err != nil {
		t.Fatal(err)
	}
	if x.HasSynced() {
		t.Fatal("synced before the informers started")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), x.HasSynced) {
		t.Fatal("never synced")
	}
	if got := len(x.Pods("ns", "web")); got != n {
		t.Errorf("HasSynced with %d of %d pods in the index", got, n)
	}
}
