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
// never reaches into the proxy, nor net/http's server.
func TestIngressLayering(t *testing.T) {
	const ing = "github.com/svcnet/svcnet/internal/ingress/"
	tests := []struct {
		pkg       string
		forbidden []string
	}{
		{"h1", []string{ing}},
		{"route", []string{ing + "h1", ing + "upstream", ing + "engine", ing + "proxy", ing + "server", ing + "controller"}},
		{"upstream", []string{ing + "h1", ing + "engine", ing + "proxy", ing + "server", ing + "controller"}},
		{"engine", []string{ing + "proxy", ing + "server", ing + "controller"}},
		{"proxy", []string{ing + "server", ing + "controller"}},
		{"server", []string{ing + "controller"}},
	}
	for _, tt := range tests {
		t.Run(tt.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./ingress/"+tt.pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			for _, d := range strings.Fields(string(out)) {
				for _, f := range tt.forbidden {
					if d != ing+tt.pkg && (d == f || strings.HasPrefix(d, f)) && strings.HasPrefix(d, ing) {
						t.Errorf("%s depends on %s", tt.pkg, d)
					}
				}
			}
		})
	}
}
