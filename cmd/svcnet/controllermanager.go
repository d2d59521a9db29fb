package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/controllermanager"
)

func newControllerManagerCommand() *cobra.Command {
	o := controllermanager.Defaults()
	cmd := &cobra.Command{
		Use:   "controller-manager",
		Short: "Run the controllers: endpoint slices, endpoints, deployments, replica sets, scheduler, node lifecycle, pod garbage collector, load balancers",
		Long: `Keep the cluster's objects true, as kube-controller-manager (and kube-scheduler and a
cloud controller manager) do, through the Kubernetes API only, so it runs against
svcnet's API server or any other. Controllers: ` + strings.Join(controllermanager.Names(), ", ") + `.
The service-lb controller runs when --load-balancer-pool is set.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return controllermanager.Run(cmd.Context(), o)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
