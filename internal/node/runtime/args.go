package runtime

import (
	"flag"
	"fmt"
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
	fs.StringVar(&o.HostnameFile, "hostname-file", "", "")
	fs.StringVar(&o.Dir, "dir", "", "")
	fs.StringVar(&security, "security", "", "")
	fs.StringVar(&o.PID, "pid", "", "")
	fs.StringVar(&o.IPC, "ipc", "", "")
	fs.StringVar(&o.UTS, "uts", "", "")
	fs.StringVar(&o.Shm, "shm", "", "")
	fs.IntVar(&o.Join, "join", 0, "")
	fs.Func("cgroup", "", func(v string) error { o.Cgroups = append(o.Cgroups, v); return nil })
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
// words (`internal container-shim`).
func ParseShimArgs(args []string) (ShimOptions, error) {
	var o ShimOptions
	fs := flag.NewFlagSet("container-shim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.StateDir, "state", "", "")
	fs.StringVar(&o.Log, "log", "", "")
	fs.BoolVar(&o.Stdio.Stdin, "stdin", false, "")
	fs.BoolVar(&o.Stdio.StdinOnce, "stdin-once", false, "")
	fs.BoolVar(&o.Stdio.TTY, "tty", false, "")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	podExec := fs.Args()
	if len(podExec) < 2 || podExec[0] != "internal" || podExec[1] != "pod-exec" {
		return o, fmt.Errorf("container-shim: want the container's `internal pod-exec …` command line, not %q", podExec)
	}
	var err error
	o.Exec, err = ParseExecArgs(podExec[2:])
	return o, err
}
