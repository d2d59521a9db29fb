package cluster

import (
	"context"
	"fmt"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/svcnet/svcnet/deploy"
	"github.com/svcnet/svcnet/internal/ingress/gateway"
)

// GatewayClassName is the GatewayClass svcnet up creates, served by the
// ingress controller.
const GatewayClassName = gateway.DefaultClassName

// installGatewayAPI installs the Gateway API's CRDs from deploy/'s
// gateway component and waits until the API server serves them, then
// creates the GatewayClass svcnet: all before the ingress controller
// starts, so that it serves them from its first sync.
func installGatewayAPI(ctx context.Context, ext apiextensionsclient.Interface, gw gatewayclient.Interface, timeout time.Duration) error {
	comp, err := deploy.Lookup("gateway")
	if err != nil {
		return err
	}
	objs, err := comp.Objects(deploy.Defaults().Map())
	if err != nil {
		return err
	}
	crds, others := deploy.CRDs(objs)
	if len(others) > 0 {
		return fmt.Errorf("gateway add-on: cannot install a %T", others[0])
	}
	if err := deploy.CreateCRDs(ctx, ext, crds, timeout); err != nil {
		return fmt.Errorf("gateway add-on: %w", err)
	}
	class := &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: GatewayClassName},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: gateway.ControllerName,
			Description: ptr.To("svcnet's ingress controller (svcnet ingress)")},
	}
	if _, err := gw.GatewayV1().GatewayClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("gateway add-on: GatewayClass %s: %w", GatewayClassName, err)
	}
	return nil
}

// gatewayClients are the clients installGatewayAPI uses.
func gatewayClients(cfg *rest.Config) (apiextensionsclient.Interface, gatewayclient.Interface, error) {
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	gw, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return ext, gw, nil
}
