package main

import (
	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/node"
)

func newNodeCommand() *cobra.Command {
	o := node.Defaults()
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run the node agent: register the Node and run its pods in network namespaces",
		Long: `The node agent (kubelet's job) runs inside its node's network namespace. It registers
its Node and Lease, runs the pods bound to it as processes in their own network
namespaces behind the node's pod bridge, and starts the node's service proxy.
svcnet up starts one per node; it needs root.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.Config()
			if err != nil {
				return err
			}
			a, err := node.New(cfg)
			if err != nil {
				return err
			}
			return a.Run(cmd.Context())
		},
	}
	o.AddFlags(cmd.Flags())
	for _, req := range node.Required {
		_ = cmd.MarkFlagRequired(req)
	}
	return cmd
}
