package apiserver_test

import (
	"os"
	"testing"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

// TestMain stops the API server that the tests calling
// framework.SharedAPIServer share, once they are all done. The others
// start their own (framework.StartAPIServer), each saying why.
func TestMain(m *testing.M) { os.Exit(framework.RunSharedAPIServerTests(m)) }
