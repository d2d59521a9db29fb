package main

import (
	"flag"
	"log/slog"
	"os"
	"strconv"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
)

func newRootCommand() *cobra.Command {
	var verbosity int
	root := &cobra.Command{
		Use:           "svcnet",
		Short:         "Kubernetes service discovery and load balancing, built for real",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(*cobra.Command, []string) {
			setupLogging(verbosity)
		},
	}
	root.PersistentFlags().IntVarP(&verbosity, "v", "v", 0, "log verbosity (0: events only; 4+: library debug logs)")
	root.AddCommand(newAPIServerCommand())
	root.AddCommand(newEtcdCommand())
	root.AddCommand(newControllerManagerCommand())
	root.AddCommand(newProxyCommand())
	root.AddCommand(newNodeCommand())
	root.AddCommand(newImageCommand())
	root.AddCommand(newInternalCommand())
	root.AddCommand(newUpCommand(), newDownCommand(), newKubeconfigCommand(), newEdgeCommand(),
		newStatusCommand(), newExecCommand(), newLoadCommand())
	root.AddCommand(newDNSCommand())
	root.AddCommand(newNodeCacheCommand())
	root.AddCommand(newIngressCommand())
	root.AddCommand(newManifestsCommand())
	return root
}

// setupLogging sends svcnet's and the Kubernetes libraries' logs to stderr
// as structured text.
func setupLogging(verbosity int) {
	level := slog.LevelInfo
	if verbosity >= 4 {
		level = slog.LevelDebug
	}
	handler := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	slog.SetDefault(slog.New(handler))
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", strconv.Itoa(verbosity))
	klog.SetSlogLogger(slog.New(handler))
}
