package node

import (
	"os"
	"testing"

	"github.com/svcnet/svcnet/internal/node/runtime/runtimetest"
)

// TestMain lets the test binary stand in for svcnet when a test starts
// containers (pods.Runtime.Self).
func TestMain(m *testing.M) {
	runtimetest.Main()
	os.Exit(m.Run())
}
