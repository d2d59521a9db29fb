package podselector

import (
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
