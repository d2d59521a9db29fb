package runtime

import (
	"flag"
	"io"
)

// ParseExecArgs reads what ExecOptions.Args wrote, less its first two
// words (`internal pod-exec`): the one reading of pod-exec's command
// line for every binary that stands for svcnet (test binaries too).
func ParseExecArgs(args []string) (ExecOptions, error) {
	var o ExecOptions
	var security string
	fs := flag.NewFlagSet("pod-exec", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.Netns, "netns", "", "")
	fs.StringVar(&o.Hostname, "hostname", "", "")
	fs.StringVar(&o.ResolvConf, "resolv-conf", "", "")
	fs.StringVar(&o.Hosts, "hosts", "", "")
	fs.StringVar(&o.Dir, "dir", "", "")
	fs.StringVar(&security, "security", "", "")
	fs.IntVar(&o.Join, "join", 0, "")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.Argv = fs.Args()
	if security != "" {
		sec, err := ParseSecurity(security)
		if err != nil {
			return o, err
		}
		o.Security = &sec
	}
	return o, nil
}

// ParseShimArgs reads what ShimOptions.Args wrote, less its first two
// words (`internal container-shim`); the container's own command line
// (pod-exec's, for RunShim) comes back as it is, not in o.Exec.
func ParseShimArgs(args []string) (o ShimOptions, podExec []string, err error) {
	fs := flag.NewFlagSet("container-shim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.StateDir, "state", "", "")
	fs.StringVar(&o.Log, "log", "", "")
	fs.BoolVar(&o.Stdio.Stdin, "stdin", false, "")
	fs.BoolVar(&o.Stdio.StdinOnce, "stdin-once", false, "")
	fs.BoolVar(&o.Stdio.TTY, "tty", false, "")
	if err := fs.Parse(args); err != nil {
		return o, nil, err
	}
	return o, fs.Args(), nil
}
