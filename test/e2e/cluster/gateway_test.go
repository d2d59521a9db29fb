package cluster_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

// TestGatewayClass: svcnet up serves the Gateway API's standard CRDs and
// its GatewayClass svcnet, which the ingress controller (with its
// manifest's RBAC) accepts; a class of another controller is left
// Pending, and one with parameters, which svcnet does not take, is not
// accepted. `svcnet manifests gateway` applies over what up installed.
func TestGatewayClass(t *testing.T) {
	t.Parallel()
	c := upWithIngress(t, 1)
	k := c.kubectl
	for _, crd := range []string{"gatewayclasses", "gateways", "httproutes", "grpcroutes", "referencegrants"} {
		k.MustRun("", "wait", "--for=condition=Established", "--timeout=30s", "crd/"+crd+".gateway.networking.k8s.io")
	}
	k.MustRun("", "wait", "--for=condition=Accepted", "--timeout=60s", "gatewayclass/svcnet")
	k.MustRun(`apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: other}
spec: {controllerName: example.com/gateway}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: configured}
spec:
  controllerName: svcnet.dev/gateway-controller
  parametersRef: {group: example.com, kind: Config, name: c}
`, "apply", "-f", "-")
	c.until("the class with parameters not accepted", 30*time.Second, func() bool {
		out, _, _ := k.Run("", "get", "gatewayclass", "configured", "-o", `jsonpath={.status.conditions[?(@.type=="Accepted")].status}/{.status.conditions[?(@.type=="Accepted")].reason}/{.status.conditions[?(@.type=="Accepted")].observedGeneration}`)
		return out == "False/InvalidParameters/1"
	})
	// The controller wrote the other two by now; this one it leaves alone.
	if out := k.MustRun("", "get", "gatewayclass", "other", "-o", `jsonpath={.status.conditions[?(@.type=="Accepted")].reason}`); out != "Pending" {
		t.Errorf("another controller's class: Accepted reason %q, want Pending (the CRD's default)", out)
	}
	if out := k.MustRun("", "get", "gatewayclass", "svcnet", "-o", "jsonpath={.status.supportedFeatures}"); out != "" {
		t.Errorf("supportedFeatures %s: no feature is served completely yet", out)
	}

	manifests, err := exec.Command(framework.Binary(t), "manifests", "gateway").Output()
	if err != nil {
		t.Fatalf("svcnet manifests gateway: %v", err)
	}
	out := k.MustRun(string(manifests), "apply", "--server-side", "-f", "-")
	if n := strings.Count(out, "serverside-applied"); n != 10 {
		t.Errorf("svcnet manifests gateway | kubectl apply --server-side: %d CRDs applied, want 10:\n%s", n, out)
	}

	logs, _, err := k.Run("", "-n", "ingress-svcnet", "logs", "-l", "app.kubernetes.io/name=ingress-controller", "--tail=-1")
	if err != nil || strings.Contains(strings.ToLower(logs), "forbidden") {
		t.Errorf("ingress controller logs (%v): refused by the API:\n%s", err, logs)
	}
}
