// Package internal_test checks the direction of dependencies: the parts
// that run on nodes and at the edge talk to the cluster only through the
// Kubernetes API, so that each runs against any API server.
package internal_test

import (
	"os/exec"
	"strings"
	"testing"
)

func TestLayering(t *testing.T) {
	const mod = "github.com/svcnet/svcnet/"
	consumers := []string{"internal/proxy/...", "internal/dns/...", "internal/ingress/...", "internal/node/..."}
	forbidden := []string{mod + "internal/apiserver", mod + "internal/registry", mod + "internal/etcd", "go.etcd.io/etcd/server"}
	for _, c := range consumers {
		t.Run(c, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../"+c).CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			deps := strings.Fields(string(out))
			if len(deps) < 10 {
				t.Fatalf("go list found only %v", deps)
			}
			for _, d := range deps {
				for _, f := range forbidden {
					if d == f || strings.HasPrefix(d, f+"/") {
						t.Errorf("%s depends on %s", c, d)
					}
				}
			}
		})
	}
}

// TestIngressLayering: the ingress's parts depend on each other one way,
// from the codec up to the controller; the engine asks its Handler and
// never reaches into the proxy, nor net/http's server; the Gateway API's
// decisions (gateway) are pure, with no API client, and so is the
// conversion of Ingresses to the Gateway API (convert), which serves
// nothing.
func TestIngressLayering(t *testing.T) {
	const ing = "github.com/svcnet/svcnet/internal/ingress/"
	checkDeps(t, map[string][]string{
		"internal/ingress/h1":       {ing + "annotations", ing + "route", ing + "upstream", ing + "engine", ing + "proxy", ing + "server", ing + "controller"},
		"internal/ingress/route":    {ing + "h1", ing + "upstream", ing + "engine", ing + "proxy", ing + "server", ing + "controller"},
		"internal/ingress/gateway":  {"k8s.io/client-go", ing + "h1", ing + "upstream", ing + "engine", ing + "proxy", ing + "server", ing + "controller"},
		"internal/ingress/convert":  {"k8s.io/client-go", ing + "h1", ing + "route", ing + "gateway", ing + "upstream", ing + "engine", ing + "proxy", ing + "server", ing + "controller", ing + "convertcmd"},
		"internal/ingress/upstream": {ing + "h1", ing + "engine", ing + "proxy", ing + "server", ing + "controller"},
		"internal/ingress/engine":   {ing + "proxy", ing + "server", ing + "controller"},
		"internal/ingress/proxy":    {ing + "server", ing + "controller"},
		"internal/ingress/server":   {ing + "controller"},
	})
}

// TestNodeLayering: the node agent's parts each do one job, and only the
// agent (internal/node) joins them. pods carries out starts and stops
// and server answers the API server's requests, neither with an API
// client of its own (what they need comes through the interfaces they
// declare, so each runs against a fake); status computes and writes
// pod status without touching processes; podstate, the containers'
// state machine, stays pure.
func TestNodeLayering(t *testing.T) {
	const node = "github.com/svcnet/svcnet/internal/node"
	checkDeps(t, map[string][]string{
		"internal/node/podstate": {"k8s.io/client-go", node + "/runtime", node + "/pods", node + "/status", node + "/server"},
		"internal/node/pods":     {"k8s.io/client-go", node + "/status", node + "/server"},
		"internal/node/status":   {node + "/runtime", node + "/pods", node + "/server", node + "/prober"},
		"internal/node/server":   {"k8s.io/client-go", node + "/status"},
	})
}

// checkDeps fails for every package (relative to the module) that
// depends on one of its forbidden packages or their subpackages.
func checkDeps(t *testing.T, forbidden map[string][]string) {
	t.Helper()
	for pkg, bad := range forbidden {
		t.Run(pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../"+pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			for _, d := range strings.Fields(string(out)) {
				for _, f := range bad {
					if d == f || strings.HasPrefix(d, f+"/") {
						t.Errorf("%s depends on %s", pkg, d)
					}
				}
			}
		})
	}
}
