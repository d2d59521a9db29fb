// Package runtimetest lets a test binary stand in for svcnet when its
// tests start containers (pods.Runtime.Self is the test binary): the
// agent starts `self internal container-shim …`, the shim `self internal
// pod-exec …`, as svcnet's own commands do.
package runtimetest

import (
	"fmt"
	"os"

	"github.com/svcnet/svcnet/internal/node/runtime"
)

// Main runs the shim or pod-exec, and exits, when the binary was started
// as one; otherwise it returns. A test package calls it first in its
// TestMain.
func Main() {
	if len(os.Args) < 3 || os.Args[1] != "internal" {
		return
	}
	switch os.Args[2] {
	case "container-shim":
		o, err := runtime.ParseShimArgs(os.Args[3:])
		if err == nil {
			err = runtime.RunShim(os.Args[0], o)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "pod-exec":
		o, err := runtime.ParseExecArgs(os.Args[3:])
		if err == nil {
			err = runtime.Exec(o)
		}
		fmt.Fprintln(os.Stderr, "cannot start:", err)
		os.Exit(128)
	case "pod-init":
		runtime.PodInit()
	}
}
