package serviceaccount

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// TestNamespaceGetsItsObjects: an active namespace gets the default
// ServiceAccount and the CA ConfigMap, and gets them back once deleted.
func TestNamespaceGetsItsObjects(t *testing.T) {
	client := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}})
	f := informers.NewSharedInformerFactory(client, 0)
	c, more := New(client, f, []byte("CA PEM"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, factory := range append(more, f) {
		factory.Start(ctx.Done())
	}
	go c.Run(ctx, 2)
	present := func() bool {
		_, saErr := client.CoreV1().ServiceAccounts("team").Get(ctx, DefaultName, metav1.GetOptions{})
		cm, cmErr := client.CoreV1().ConfigMaps("team").Get(ctx, RootCAConfigMap, metav1.GetOptions{})
		return saErr == nil && cmErr == nil && cm.Data[RootCAKey] == "CA PEM"
	}
	await := func(what string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return present(), nil
		})
		if err != nil {
			t.Fatalf("%s: no ServiceAccount and CA ConfigMap in the namespace", what)
		}
	}
	await("at start")
	if err := client.CoreV1().ServiceAccounts("team").Delete(ctx, DefaultName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	await("after deleting the ServiceAccount")
}
