package svcstate

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestTypedHandler(t *testing.T) {
	var got []string
	h := typedHandler(
		func(s *v1.Service) { got = append(got, "add "+s.Name) },
		func(old, cur *v1.Service) { got = append(got, "update "+old.Name+" "+cur.Name) },
		func(s *v1.Service) { got = append(got, "delete "+s.Name) })
	a := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	b := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	h.OnAdd(a, false)
	h.OnAdd(&v1.Pod{}, false) // not a Service: ignored
	h.OnUpdate(a, b)
	h.OnDelete(b)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/a", Obj: a})
	want := []string{"add a", "update a b", "delete b", "delete a"}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: %q, want %q", i, got[i], want[i])
		}
	}
}
