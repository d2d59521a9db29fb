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
