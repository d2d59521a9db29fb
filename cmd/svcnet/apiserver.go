package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/apiserver"
)

func newAPIServerCommand() *cobra.Command {
	o := apiserver.Defaults()
	cmd := &cobra.Command{
		Use:   "apiserver",
		Short: "Serve the Kubernetes API, stored in etcd",
		Long: `Serve the Kubernetes REST API for the kinds svcnet uses (core/v1 pods,
services, endpoints, nodes, namespaces …, apps/v1, discovery.k8s.io/v1,
networking.k8s.io/v1, coordination.k8s.io/v1) over TLS, with an embedded
etcd (or --etcd-servers). kubectl and client-go work against it as against
kube-apiserver.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := apiserver.New(cmd.Context(), o)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "svcnet API server at %s\nadmin kubeconfig: %s\n", s.URL, s.AdminKubeconfig)
			return s.Run(cmd.Context())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
