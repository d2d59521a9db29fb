package ingress_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/svcnet/svcnet/deploy"
	"github.com/svcnet/svcnet/internal/ingress/gateway"
)

// The Gateways' Services go beside the publish Service, which is the
// ingress manifest's (deploy/ingress.yaml): a LoadBalancer in
// ingress-svcnet that selects the controller's pods. Here the ingress is
// a process, not a pod, so that Service has no endpoints, and no load
// balancer gives it or the Gateways' Services an address: a Gateway
// stays Programmed=False (AddressNotAssigned). Its listeners are served
// all the same once its Service exists, on the proxy ports in that
// Service's spec.ports[].targetPort, which the ingress binds on every
// address of its namespace; the benchmarks read them there and send
// their requests to ingressIP:<proxy port>.
const (
	publishNamespace = "ingress-svcnet"
	publishName      = "ingress-controller"
	// ingressUser is the identity of the ingress's kubeconfig
	// (apiserver.IngressUser).
	ingressUser = "system:svcnet-ingress"
)

// gatewayEnv is an env whose ingress also serves the Gateway API.
type gatewayEnv struct {
	*env
	gw gatewayclient.Interface
}

// newGatewayEnv is newEnv with the Gateway API, installed as `svcnet up`
// does before the ingress starts: the ingress manifest's RBAC (bound to
// the ingress's identity here) and publish Service, the CRDs of `svcnet
// manifests gateway`, and the GatewayClass svcnet. The ingress runs with
// --publish-service and args; it returns once the ingress has accepted
// the class.
func newGatewayEnv(t testing.TB, args ...string) *gatewayEnv {
	t.Helper()
	e := newCluster(t)
	g := &gatewayEnv{env: e}
	cfg := rest.CopyConfig(e.api.Config("admin"))
	// Custom resources have no protobuf encoding.
	cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	var err error
	if g.gw, err = gatewayclient.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	ingress, err := deploy.Lookup("ingress")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := ingress.Objects(deploy.Defaults().Map())
	if err != nil {
		t.Fatal(err)
	}
	me := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: ingressUser}
	var install []runtime.Object
	for _, o := range objs {
		switch x := o.(type) {
		case *corev1.Namespace, *rbacv1.ClusterRole, *rbacv1.Role:
			install = append(install, o)
		case *rbacv1.ClusterRoleBinding:
			x.Subjects = append(x.Subjects, me)
			install = append(install, o)
		case *rbacv1.RoleBinding:
			x.Subjects = append(x.Subjects, me)
			install = append(install, o)
		case *corev1.Service:
			if x.Namespace == publishNamespace && x.Name == publishName {
				install = append(install, o)
			}
		}
	}
	if err := deploy.Create(ctx, e.client, install); err != nil {
		t.Fatal(err)
	}

	gw, err := deploy.Lookup("gateway")
	if err != nil {
		t.Fatal(err)
	}
	objs, err = gw.Objects(deploy.Defaults().Map())
	if err != nil {
		t.Fatal(err)
	}
	crds, _ := deploy.CRDs(objs)
	if err := deploy.CreateCRDs(ctx, ext, crds, time.Minute); err != nil {
		t.Fatal(err)
	}
	class := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: gateway.DefaultClassName},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: gateway.ControllerName}}
	if _, err := g.gw.GatewayV1().GatewayClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startIngress(append([]string{"--publish-service", publishNamespace + "/" + publishName}, args...)...)
	e.eventually("the GatewayClass svcnet accepted", func() error {
		c, err := g.gw.GatewayV1().GatewayClasses().Get(ctx, gateway.DefaultClassName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(c.Status.Conditions, string(gatewayv1.GatewayClassConditionStatusAccepted)) {
			return fmt.Errorf("conditions %v", c.Status.Conditions)
		}
		return nil
	})
	return g
}

// gateway makes the Gateway default/name of the class svcnet with one
// listener, "http", HTTP on port 80, taking the routes of its namespace,
// and returns the proxy port the ingress serves it on, from the
// Gateway's Service.
func (g *gatewayEnv) gateway(name string) int {
	g.t.Helper()
	ctx := context.Background()
	obj := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: gatewayv1.GatewaySpec{
		GatewayClassName: gateway.DefaultClassName,
		Listeners:        []gatewayv1.Listener{{Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: 80}}}}
	if _, err := g.gw.GatewayV1().Gateways("default").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		g.t.Fatal(err)
	}
	svc := gateway.ServiceName(types.NamespacedName{Namespace: "default", Name: name})
	port := 0
	g.eventually("the Service "+publishNamespace+"/"+svc+" of the Gateway "+name, func() error {
		s, err := g.client.CoreV1().Services(publishNamespace).Get(ctx, svc, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, p := range s.Spec.Ports {
			if tp := p.TargetPort.IntValue(); p.Port == 80 && tp >= gateway.FirstPort && tp <= gateway.LastPort {
				port = tp
				return nil
			}
		}
		return fmt.Errorf("no proxy port for port 80 in %v", s.Spec.Ports)
	})
	return port
}

// gatewayProgrammed is the Gateway's Programmed condition, as
// "status/reason".
func (g *gatewayEnv) gatewayProgrammed(name string) string {
	o, err := g.gw.GatewayV1().Gateways("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	c := meta.FindStatusCondition(o.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed))
	if c == nil {
		return "none"
	}
	return string(c.Status) + "/" + c.Reason
}

// hostRoute is the HTTPRoute default/name on the Gateway gw, which routes
// every path of host to port 80 of the Service service: the Gateway API's
// hostIngress.
func hostRoute(gw, name, host, service string) *gatewayv1.HTTPRoute {
	return &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: gatewayv1.HTTPRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(gw)}}},
		Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(host)},
		Rules:           []gatewayv1.HTTPRouteRule{prefixRule("/", service)},
	}}
}

// prefixRule sends the paths under prefix to port 80 of the Service
// service.
func prefixRule(prefix, service string) gatewayv1.HTTPRouteRule {
	return gatewayv1.HTTPRouteRule{
		Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To(prefix)}}},
		BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
			Name: gatewayv1.ObjectName(service), Port: ptr.To(gatewayv1.PortNumber(80))}}}},
	}
}

// createRoute creates an HTTPRoute.
func (g *gatewayEnv) createRoute(r *gatewayv1.HTTPRoute) {
	g.t.Helper()
	if _, err := g.gw.GatewayV1().HTTPRoutes(r.Namespace).Create(context.Background(), r, metav1.CreateOptions{}); err != nil {
		g.t.Fatal(err)
	}
}
