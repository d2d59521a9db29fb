package controller

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

type failingPods struct{ corelisters.PodNamespaceLister }

func (failingPods) Get(string) (*corev1.Pod, error) { return nil, errors.New("cache broken") }

func TestLookup(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = idx.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}})
	pods := corelisters.NewPodLister(idx)
	if p, gone, err := Lookup("ns/p", pods.Pods); gone || err != nil || p.Name != "p" {
		t.Errorf("present pod: %v, gone %v, err %v", p, gone, err)
	}
	for _, key := range []string{"ns/other", "a/b/c"} {
		if _, gone, err := Lookup(key, pods.Pods); !gone || err != nil {
			t.Errorf("%s: gone %v, err %v; want gone without error", key, gone, err)
		}
	}
	broken := func(string) corelisters.PodNamespaceLister { return failingPods{} }
	if _, gone, err := Lookup("ns/p", broken); gone || err == nil {
		t.Errorf("failing lister: gone %v, err %v; want an error", gone, err)
	}
}
