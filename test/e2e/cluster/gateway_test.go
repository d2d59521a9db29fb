package cluster_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/pki"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// TestGatewayAPI: svcnet up serves the Gateway API's standard CRDs and
// its GatewayClass svcnet, which the ingress controller (with its
// manifest's RBAC) accepts; a class of another controller is left
// Pending, and one with parameters, which svcnet does not take, is not
// accepted. `svcnet manifests gateway` applies over what up installed.
func TestGatewayAPI(t *testing.T) {
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
	// The features the conformance suite infers from the class, sorted
	// by name as the API requires.
	if out := k.MustRun("", "get", "gatewayclass", "svcnet", "-o", "jsonpath={.status.supportedFeatures[*].name}"); !strings.HasPrefix(out, "GRPCRoute GRPCRouteNamedRouteRule Gateway ") ||
		!strings.Contains(out, " HTTPRoute ") || !strings.HasSuffix(out, " TLSRoute TLSRouteModeMixed TLSRouteModeTerminate") {
		t.Errorf("supportedFeatures %q", out)
	}

	manifests, err := exec.Command(framework.Binary(t), "manifests", "gateway").Output()
	if err != nil {
		t.Fatalf("svcnet manifests gateway: %v", err)
	}
	out := k.MustRun(string(manifests), "apply", "--server-side", "-f", "-")
	if n := strings.Count(out, "serverside-applied"); n != 10 {
		t.Errorf("svcnet manifests gateway | kubectl apply --server-side: %d CRDs applied, want 10:\n%s", n, out)
	}

	testGatewayRoutes(t, c)

	logs, _, err := k.Run("", "-n", "ingress-svcnet", "logs", "-l", "app.kubernetes.io/name=ingress-controller", "--tail=-1")
	if err != nil || strings.Contains(strings.ToLower(logs), "forbidden") {
		t.Errorf("ingress controller logs (%v): refused by the API:\n%s", err, logs)
	}
}

// testGatewayRoutes applies examples/gateway.yaml over the reference
// scenario and sends requests to the Gateway's address from the outside
// client: its routes, their statuses, a route whose backend is missing
// (500, BackendNotFound), a redirect, and the Gateway's Service removed
// with it.
func testGatewayRoutes(t *testing.T, c *localCluster) {
	k := c.kubectl
	k.MustRun(examples(t), "apply", "-f", "-")
	k.MustRun(example(t, "ingress.yaml"), "apply", "-f", "-")
	k.MustRun(example(t, "gateway.yaml"), "apply", "-f", "-")
	k.MustRun("", "wait", "--for=condition=Programmed", "--timeout=60s", "gateway/web")
	addr := k.MustRun("", "get", "gateway", "web", "-o", "jsonpath={.status.addresses[0].value}")
	if !strings.HasPrefix(addr, "172.18.255.") {
		t.Fatalf("the Gateway's address %q is not one of the edge's", addr)
	}
	curl := func(host, path string, extra ...string) (string, error) {
		argv := append([]string{"curl", "-s", "--connect-timeout", "5", "--max-time", "10", "-H", "Host: " + host}, extra...)
		return c.exec("client", append(argv, "http://"+addr+path)...)
	}
	c.until("hostnames through the Gateway", time.Minute, func() bool {
		out, err := curl("hostnames.example", "/")
		c.lastErr = fmt.Errorf("%v: %q", err, out)
		return err == nil && strings.HasPrefix(out, "hostnames-")
	})
	c.until("/echo through the Gateway", time.Minute, func() bool {
		out, err := curl("hostnames.example", "/echo?msg=gateway")
		c.lastErr = fmt.Errorf("%v: %q", err, out)
		return err == nil && out == "gateway"
	})
	if out, err := curl("other.example", "/", "-o", "/dev/null", "-w", "%{http_code}"); err != nil || out != "404" {
		t.Errorf("a host no route has: %q (%v), want 404", out, err)
	}
	status := func(kind, name, jsonpath string) string {
		out, _, _ := k.Run("", "get", kind, name, "-o", "jsonpath="+jsonpath)
		return out
	}
	const parentConds = `{.status.parents[0].controllerName} {.status.parents[0].conditions[?(@.type=="Accepted")].reason} {.status.parents[0].conditions[?(@.type=="ResolvedRefs")].reason}`
	c.until("the HTTPRoute's status", 30*time.Second, func() bool {
		return status("httproute", "hostnames", parentConds) == "svcnet.dev/gateway-controller Accepted ResolvedRefs"
	})
	if out := status("gateway", "web", `{.status.listeners[0].attachedRoutes} {.status.listeners[0].supportedKinds[0].kind}`); out != "1 HTTPRoute" {
		t.Errorf("the Gateway's listener: %q, want 1 attached HTTPRoute", out)
	}

	k.MustRun(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: broken}
spec:
  parentRefs: [{name: web}]
  hostnames: [broken.example]
  rules:
  - backendRefs: [{name: nothing-here, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: moved}
spec:
  parentRefs: [{name: web}]
  hostnames: [moved.example]
  rules:
  - filters:
    - type: RequestRedirect
      requestRedirect: {scheme: https, hostname: hostnames.example, statusCode: 301}
`, "apply", "-f", "-")
	c.until("the broken route's status", 30*time.Second, func() bool {
		return status("httproute", "broken", parentConds) == "svcnet.dev/gateway-controller Accepted BackendNotFound"
	})
	c.until("500 for the broken route's backend", 30*time.Second, func() bool {
		out, err := curl("broken.example", "/", "-o", "/dev/null", "-w", "%{http_code}")
		c.lastErr = fmt.Errorf("%v: %q", err, out)
		return err == nil && out == "500"
	})
	// The missing Service arrives: the route's status and traffic follow
	// without any change to the route.
	k.MustRun(`apiVersion: v1
kind: Service
metadata: {name: nothing-here}
spec:
  selector: {app: hostnames}
  ports: [{port: 80, targetPort: 9376}]
`, "apply", "-f", "-")
	c.until("the broken route's backend resolved once its Service exists", 30*time.Second, func() bool {
		return status("httproute", "broken", parentConds) == "svcnet.dev/gateway-controller Accepted ResolvedRefs"
	})
	c.until("the broken route served once its Service exists", 30*time.Second, func() bool {
		out, err := curl("broken.example", "/")
		c.lastErr = fmt.Errorf("%v: %q", err, out)
		return err == nil && strings.HasPrefix(out, "hostnames-")
	})
	c.until("the redirect", 30*time.Second, func() bool {
		out, err := curl("moved.example", "/a?b=c", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}")
		c.lastErr = fmt.Errorf("%v: %q", err, out)
		return err == nil && out == "301 https://hostnames.example/a?b=c"
	})

	testGatewayHTTPS(t, c, addr)

	k.MustRun("", "delete", "gateway", "web")
	c.until("the Gateway's Service removed with it", 30*time.Second, func() bool {
		out, _, _ := k.Run("", "-n", "ingress-svcnet", "get", "services", "-l", "gateway.networking.k8s.io/gateway-name=web", "-o", "name")
		return out == ""
	})
}

// testGatewayHTTPS adds an HTTPS listener to the Gateway web with a
// certificate for secure.example from a Secret, a second one whose
// Secret is missing, and a TLS listener that terminates TLS with the
// same certificate for a TLSRoute: the first and the last serve their
// routes over TLS with that certificate (curl verifies it), the second
// is reported.
func testGatewayHTTPS(t *testing.T, c *localCluster, addr string) {
	k := c.kubectl
	dir := t.TempDir()
	ca, err := pki.EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err := ca.Issue("secure.example", nil, []string{"secure.example"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	k.MustRun("", "create", "secret", "tls", "secure-cert", "--cert="+filepath.Join(dir, "tls.crt"), "--key="+filepath.Join(dir, "tls.key"))
	k.MustRun(`[{"op": "add", "path": "/spec/listeners/-", "value": {"name": "https", "protocol": "HTTPS", "port": 443, "hostname": "secure.example",
  "tls": {"certificateRefs": [{"name": "secure-cert"}]}}},
 {"op": "add", "path": "/spec/listeners/-", "value": {"name": "broken-tls", "protocol": "HTTPS", "port": 8443,
  "tls": {"certificateRefs": [{"name": "no-such-secret"}]}}},
 {"op": "add", "path": "/spec/listeners/-", "value": {"name": "tls-terminate", "protocol": "TLS", "port": 8444, "hostname": "secure.example",
  "tls": {"mode": "Terminate", "certificateRefs": [{"name": "secure-cert"}]}}}]`, "patch", "gateway", "web", "--type=json", "--patch-file=/dev/stdin")
	k.MustRun(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: secure}
spec:
  parentRefs: [{name: web, sectionName: https}]
  rules:
  - backendRefs: [{name: hostnames, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: secure-tcp}
spec:
  parentRefs: [{name: web, sectionName: tls-terminate}]
  hostnames: [secure.example]
  rules:
  - backendRefs: [{name: hostnames, port: 80}]
`, "apply", "-f", "-")
	// The TLS listener terminates TLS and passes the bytes on as they
	// are: HTTP here, which the hostnames pods answer.
	c.until("hostnames through the TLS listener and a TLSRoute", time.Minute, func() bool {
		out, err := c.exec("client", "curl", "-s", "--connect-timeout", "5", "--max-time", "10", "--cacert", filepath.Join(dir, pki.CACertFile),
			"--resolve", "secure.example:8444:"+addr, "https://secure.example:8444/")
		c.lastErr = fmt.Errorf("%v: %q", err, out)
		return err == nil && strings.HasPrefix(out, "hostnames-")
	})
	c.until("hostnames over HTTPS through the Gateway", time.Minute, func() bool {
		out, err := c.exec("client", "curl", "-s", "--connect-timeout", "5", "--max-time", "10", "--cacert", filepath.Join(dir, pki.CACertFile),
			"--resolve", "secure.example:443:"+addr, "https://secure.example/")
		c.lastErr = fmt.Errorf("%v: %q", err, out)
		return err == nil && strings.HasPrefix(out, "hostnames-")
	})
	listener := func(i int) string {
		out, _, _ := k.Run("", "get", "gateway", "web", "-o", fmt.Sprintf(`jsonpath={.status.listeners[%d].name} {.status.listeners[%d].conditions[?(@.type=="ResolvedRefs")].reason} {.status.listeners[%d].conditions[?(@.type=="Programmed")].status} {.status.listeners[%d].attachedRoutes}`, i, i, i, i))
		return out
	}
	// The listener whose Secret is missing is not programmed, but the
	// three routes without a sectionName (hostnames, broken, moved) are
	// attached to it, as the spec counts them.
	c.until("the HTTPS listeners' status", 30*time.Second, func() bool {
		return listener(1) == "https ResolvedRefs True 1" && listener(2) == "broken-tls InvalidCertificateRef False 3"
	})
}
