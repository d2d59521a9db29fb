package main

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/apilb"
	"github.com/svcnet/svcnet/internal/images"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/node/runtime"
)

// newImageCommand runs a built-in image: `svcnet image hostnames`.
func newImageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "image NAME [ARGS...]",
		Short:  "Run a built-in container image (what pods of image svcnet/NAME run)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		// The image parses its own flags.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, img := range images.Builtin {
				if images.Short(img) == args[0] && img.Run != nil {
					return img.Run(cmd.Context(), args[1:])
				}
			}
			return fmt.Errorf("no built-in image %q (built-in images: %v)", args[0], images.Names())
		},
	}
	return cmd
}

// newInternalCommand holds the helpers svcnet starts itself with.
func newInternalCommand() *cobra.Command {
	root := &cobra.Command{Use: "internal", Hidden: true, Short: "Helpers svcnet runs itself"}
	var o runtime.ExecOptions
	var security string
	podExec := &cobra.Command{
		Use:   "pod-exec [flags] -- COMMAND [ARGS...]",
		Short: "Enter a pod's namespaces and run a command (how containers start)",
		Args:  cobra.MinimumNArgs(1),
		Run: func(_ *cobra.Command, args []string) {
			o.Argv = args
			err := error(nil)
			if security != "" {
				var sec runtime.Security
				if sec, err = runtime.ParseSecurity(security); err == nil {
					o.Security = &sec
				}
			}
			if err == nil {
				err = runtime.Exec(o)
			}
			fmt.Fprintln(os.Stderr, "svcnet: cannot start the container:", err)
			os.Exit(128) // the node agent reads this as StartError
		},
	}
	f := podExec.Flags()
	f.StringVar(&o.Netns, "netns", "", "named network namespace of the pod")
	f.StringVar(&o.Hostname, "hostname", "", "hostname of the pod")
	f.StringVar(&o.ResolvConf, "resolv-conf", "", "file to show as /etc/resolv.conf")
	f.StringVar(&o.Hosts, "hosts", "", "file to show as /etc/hosts")
	f.StringVar(&o.Dir, "dir", "", "working directory")
	f.StringVar(&security, "security", "", "the container's confinement (JSON: user, groups, capabilities, mounts)")
	f.IntVar(&o.Join, "join", 0, "pid of the running container whose mount namespace to enter")
	var ns string
	netnsExec := &cobra.Command{
		Use:   "netns-exec --netns NAME -- COMMAND [ARGS...]",
		Short: "Run a command in a named network namespace (how node agents start)",
		Args:  cobra.MinimumNArgs(1),
		Run: func(_ *cobra.Command, args []string) {
			err := runtime.Exec(runtime.ExecOptions{Netns: ns, Argv: args})
			fmt.Fprintln(os.Stderr, "svcnet:", err)
			os.Exit(128)
		},
	}
	netnsExec.Flags().StringVar(&ns, "netns", "", "named network namespace")
	var relayFd int
	var relayNetns, relayTo string
	relay := &cobra.Command{
		Use:   "relay --listen-fd N --netns NAME --to HOST:PORT",
		Short: "Pass the connections of an inherited listening socket to an address inside a namespace (the host's door to a local cluster's API balancer)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := net.FileListener(os.NewFile(uintptr(relayFd), "listener"))
			if err != nil {
				return fmt.Errorf("--listen-fd %d: %w", relayFd, err)
			}
			return apilb.Forward(cmd.Context(), l, func(ctx context.Context) (net.Conn, error) {
				return netns.DialContext(ctx, relayNetns, "tcp", relayTo)
			})
		},
	}
	relay.Flags().IntVar(&relayFd, "listen-fd", 3, "inherited listening socket")
	relay.Flags().StringVar(&relayNetns, "netns", "", "named network namespace to connect from")
	relay.Flags().StringVar(&relayTo, "to", "", "address to connect to")
	root.AddCommand(relay)
	var stateDir, logPath string
	var stdio runtime.Stdio
	shim := &cobra.Command{
		Use:   "container-shim --state DIR --log FILE -- POD-EXEC-ARGS...",
		Short: "Run one container and outlive the node agent that started it",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			return runtime.RunShim(self, stateDir, logPath, stdio, args)
		},
	}
	shim.Flags().StringVar(&stateDir, "state", "", "the container start's state directory")
	shim.Flags().StringVar(&logPath, "log", "", "the container's log file")
	shim.Flags().BoolVar(&stdio.Stdin, "stdin", false, "keep the container's stdin open for attach")
	shim.Flags().BoolVar(&stdio.StdinOnce, "stdin-once", false, "close the container's stdin when the first attach's input ends")
	shim.Flags().BoolVar(&stdio.TTY, "tty", false, "give the container a terminal")
	root.AddCommand(podExec, netnsExec, shim, newSuperviseCommand())
	return root
}
