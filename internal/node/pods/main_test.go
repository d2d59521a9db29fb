package pods

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/svcnet/svcnet/internal/node/runtime"
)

// TestMain lets the test binary stand in for svcnet when a test starts
// containers (Runtime.Self): the agent starts `self internal
// container-shim …`, the shim `self internal pod-exec …`, as svcnet's
// own commands do.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "internal" {
		switch os.Args[2] {
		case "container-shim":
			var state, log string
			fs := flag.NewFlagSet("container-shim", flag.ExitOnError)
			fs.StringVar(&state, "state", "", "")
			fs.StringVar(&log, "log", "", "")
			_ = fs.Parse(os.Args[3:])
			if err := runtime.RunShim(os.Args[0], state, log, runtime.Stdio{}, fs.Args()); err != nil {
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
	os.Exit(m.Run())
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
