package cluster

import (
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/svcnet/svcnet/deploy"
	"github.com/svcnet/svcnet/internal/ingress/gateway"
)

// TestInstallGatewayAPI: every CRD of the gateway component is created
// and the GatewayClass svcnet names svcnet's controller; a second run
// (a restarted svcnet up) keeps what is there.
func TestInstallGatewayAPI(t *testing.T) {
	ext := apiextensionsfake.NewClientset()
	// The API server establishes what it is given.
	ext.PrependReactor("create", "customresourcedefinitions", func(a k8stesting.Action) (bool, runtime.Object, error) {
		crd := a.(k8stesting.CreateAction).GetObject().(*apiextensionsv1.CustomResourceDefinition)
		crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
		return false, nil, nil
	})
	gw := gatewayfake.NewClientset()
	for range 2 {
		if err := installGatewayAPI(t.Context(), ext, gw, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	comp, _ := deploy.Lookup("gateway")
	objs, err := comp.Objects(deploy.Defaults().Map())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := deploy.CRDs(objs)
	got, _ := ext.ApiextensionsV1().CustomResourceDefinitions().List(t.Context(), metav1.ListOptions{})
	if len(got.Items) != len(want) || len(want) < 5 {
		t.Errorf("%d CRDs created, want %d", len(got.Items), len(want))
	}
	class, err := gw.GatewayV1().GatewayClasses().Get(t.Context(), GatewayClassName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if class.Spec.ControllerName != gateway.ControllerName {
		t.Errorf("GatewayClass %s: controller %q, want %q", class.Name, class.Spec.ControllerName, gateway.ControllerName)
	}
}

// TestInstallGatewayAPINotEstablished: CRDs the API server never serves
// fail the add-on, naming one.
func TestInstallGatewayAPINotEstablished(t *testing.T) {
	err := installGatewayAPI(t.Context(), apiextensionsfake.NewClientset(), gatewayfake.NewClientset(), 200*time.Millisecond)
	if err == nil {
		t.Fatal("no error")
	}
	if want := "not established"; !strings.Contains(err.Error(), want) {
		t.Errorf("err %v, want %q", err, want)
	}
}
