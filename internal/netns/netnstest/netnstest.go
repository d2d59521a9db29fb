// Package netnstest makes network namespaces for the kernel tests of
// svcnet's libraries: named svcnet-test-…, removed when the test ends,
// also when it fails.
package netnstest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/svcnet/svcnet/internal/netns"
)

// New creates svcnet-test-<what>-<random> and deletes it in t.Cleanup.
// Tests that need it skip when not root (CI runs as root).
func New(t testing.TB, what string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root; CI runs as root")
	}
	ns := fmt.Sprintf("svcnet-test-%s-%d", what, rand.IntN(1e9))
	if err := netns.Create(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Delete(ns) })
	return ns
}
