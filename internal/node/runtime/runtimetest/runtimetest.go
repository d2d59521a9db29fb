// Package runtimetest lets a test binary stand in for svcnet when its
// tests start containers (pods.Runtime.Self is the test binary): the
// agent starts `self internal container-shim …`, the shim `self internal
// pod-exec …`, as svcnet's own commands do.
package runtimetest

import (
	"flag"
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
		var state, log string
		var stdio runtime.Stdio
		fs := flag.NewFlagSet("container-shim", flag.ExitOnError)
		fs.StringVar(&state, "state", "", "")
		fs.StringVar(&log, "log", "", "")
		fs.BoolVar(&stdio.Stdin, "stdin", false, "")
		fs.BoolVar(&stdio.StdinOnce, "stdin-once", false, "")
		fs.BoolVar(&stdio.TTY, "tty", false, "")
		_ = fs.Parse(os.Args[3:])
		if err := runtime.RunShim(os.Args[0], state, log, stdio, fs.Args()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "pod-exec":
		err := podExec(os.Args[3:])
		fmt.Fprintln(os.Stderr, "cannot start:", err)
		os.Exit(128)
	}
}

// podExec reads what runtime.ExecOptions.Args wrote and runs it.
func podExec(args []string) error {
	var o runtime.ExecOptions
	var security string
	fs := flag.NewFlagSet("pod-exec", flag.ContinueOnError)
	fs.StringVar(&o.Netns, "netns", "", "")
	fs.StringVar(&o.Hostname, "hostname", "", "")
	fs.StringVar(&o.ResolvConf, "resolv-conf", "", "")
	fs.StringVar(&o.Hosts, "hosts", "", "")
	fs.StringVar(&o.Dir, "dir", "", "")
	fs.StringVar(&security, "security", "", "")
	fs.IntVar(&o.Join, "join", 0, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Argv = fs.Args()
	if security != "" {
		sec, err := runtime.ParseSecurity(security)
		if err != nil {
			return err
		}
		o.Security = &sec
	}
	return runtime.Exec(o)
}
