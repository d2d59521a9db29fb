package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestIngressConvertCommand: `svcnet ingress convert` is reached under
// `svcnet ingress`, reads stdin and prints on the command's outputs.
func TestIngressConvertCommand(t *testing.T) {
	const in = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  annotations:
    nginx.ingress.kubernetes.io/proxy-body-size: 1m
spec:
  defaultBackend:
    service:
      name: web
      port:
        number: 80
`
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetIn(strings.NewReader(in))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"ingress", "convert", "-f", "-", "-n", "shop", "--gateway-name", "public"})
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: Gateway\nmetadata:\n  name: public\n  namespace: shop", "kind: HTTPRoute\nmetadata:\n  name: web\n  namespace: shop"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout has no %q:\n%s", want, out.String())
		}
	}
	if want := "not carried over: nginx.ingress.kubernetes.io/proxy-body-size on shop/web: the Gateway API has no request-body limit\n"; errOut.String() != want {
		t.Errorf("stderr %q, want %q", errOut.String(), want)
	}
	cmd = newRootCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"ingress", "convert"})
	if err := cmd.ExecuteContext(t.Context()); err == nil || !strings.Contains(err.Error(), "give the Ingresses with -f FILE") {
		t.Errorf("no source: err %v", err)
	}
}
