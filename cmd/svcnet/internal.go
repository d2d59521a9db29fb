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
	// The helpers' command lines are runtime's to read (ParseExecArgs,
	// ParseShimArgs), as runtime writes them, and as test binaries that
	// stand for svcnet read them too.
	podExec := &cobra.Command{
		Use:                "pod-exec [flags] -- COMMAND [ARGS...]",
		Short:              "Enter a pod's namespaces and run a command (how containers start)",
		DisableFlagParsing: true,
		Run: func(_ *cobra.Command, args []string) {
			o, err := runtime.ParseExecArgs(args)
			if err == nil {
				err = runtime.Exec(o)
			}
			fmt.Fprintln(os.Stderr, "svcnet: cannot start the container:", err)
			os.Exit(128) // the node agent reads this as StartError
		},
	}
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
	shim := &cobra.Command{
		Use:                "container-shim --state DIR --log FILE [--stdin] [--stdin-once] [--tty] -- internal pod-exec ...",
		Short:              "Run one container and outlive the node agent that started it",
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			o, err := runtime.ParseShimArgs(args)
			if err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			return runtime.RunShim(self, o)
		},
	}
	podInit := &cobra.Command{
		Use:   "pod-init",
		Short: "Hold a pod's shared PID namespace and reap its orphans (the pause container)",
		Args:  cobra.NoArgs,
		Run:   func(*cobra.Command, []string) { runtime.PodInit() },
	}
	root.AddCommand(podExec, netnsExec, shim, podInit, newSuperviseCommand())
	return root
}
