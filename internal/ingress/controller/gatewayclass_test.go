package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/svcnet/svcnet/internal/ingress/gateway"
)

func gatewayClass(name string, controller gatewayv1.GatewayController) *gatewayv1.GatewayClass {
	return &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: controller},
		Status: gatewayv1.GatewayClassStatus{Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionUnknown,
			Reason: "Pending", Message: "Waiting for controller", LastTransitionTime: metav1.Unix(0, 0)}}},
	}
}

// TestGatewayClasses: once the API server serves the Gateway API, our
// class is accepted, a class of another controller is left alone, and a
// class created later is accepted too.
func TestGatewayClasses(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	disco := &switchedDiscovery{FakeDiscovery: kubefake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)}
	disco.Resources = []*metav1.APIResourceList{{GroupVersion: gatewayv1.GroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: "gatewayclasses", Kind: "GatewayClass"}}}}
	client := gatewayfake.NewClientset(gatewayClass("svcnet", gateway.ControllerName), gatewayClass("other", "example.com/gateway"))
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	done := make(chan error, 1)
	go func() {
		done <- runGatewayAPI(ctx, disco, client, GatewayConfig{Controller: gateway.ControllerName, Now: func() time.Time { return now }}, 10*time.Millisecond, nil)
	}()

	// Not served yet: nothing is written.
	time.Sleep(50 * time.Millisecond)
	if c := accepted(t, client, "svcnet"); c.Status != metav1.ConditionUnknown {
		t.Fatalf("status written before the API served GatewayClasses: %+v", c)
	}
	disco.on.Store(true)

	waitAccepted(t, client, "svcnet")
	c := accepted(t, client, "svcnet")
	if c.Reason != "Accepted" || c.ObservedGeneration != 1 || !c.LastTransitionTime.Time.Equal(now) {
		t.Errorf("svcnet: Accepted %+v", c)
	}
	if c := accepted(t, client, "other"); c.Status != metav1.ConditionUnknown || c.Reason != "Pending" {
		t.Errorf("another controller's class was changed: %+v", c)
	}

	if _, err := client.GatewayV1().GatewayClasses().Create(ctx, gatewayClass("second", gateway.ControllerName), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAccepted(t, client, "second")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

// switchedDiscovery serves its resources once on (the CRDs installed).
type switchedDiscovery struct {
	*fakediscovery.FakeDiscovery
	on atomic.Bool
}

func (d *switchedDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if !d.on.Load() {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	return d.FakeDiscovery.ServerResourcesForGroupVersion(gv)
}

func accepted(t *testing.T, client *gatewayfake.Clientset, name string) metav1.Condition {
	t.Helper()
	gc, err := client.GatewayV1().GatewayClasses().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(gc.Status.Conditions, "Accepted")
	if c == nil {
		t.Fatalf("%s: no Accepted condition", name)
	}
	return *c
}

func waitAccepted(t *testing.T, client *gatewayfake.Clientset, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return accepted(t, client, name).Status == metav1.ConditionTrue, nil
	})
	if err != nil {
		t.Fatalf("%s not accepted: %+v", name, accepted(t, client, name))
	}
}

func TestServesGatewayAPI(t *testing.T) {
	disco := kubefake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	if ok, err := servesGatewayAPI(disco); ok || err != nil {
		t.Errorf("no group: %v, %v", ok, err)
	}
	disco.Resources = []*metav1.APIResourceList{{GroupVersion: gatewayv1.GroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: "gateways", Kind: "Gateway"}}}}
	if ok, _ := servesGatewayAPI(disco); ok {
		t.Error("served without gatewayclasses")
	}
	disco.Resources[0].APIResources = append(disco.Resources[0].APIResources, metav1.APIResource{Name: "gatewayclasses", Kind: "GatewayClass"})
	if ok, err := servesGatewayAPI(disco); !ok || err != nil {
		t.Errorf("served: %v, %v", ok, err)
	}
}
