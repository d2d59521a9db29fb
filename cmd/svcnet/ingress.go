package main

import (
	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/ingress/controller"
)

func newIngressCommand() *cobra.Command {
	o := controller.Defaults()
	cmd := &cobra.Command{
		Use:   "ingress",
		Short: "Route HTTP and HTTPS by Ingress rules to the pods of Services, without reloads",
		Long: `The ingress controller and its proxy in one process: it watches the Ingresses of its
class (spec.ingressClassName naming an IngressClass whose spec.controller is
--controller-class, the kubernetes.io/ingress.class annotation, or the default
IngressClass), Services, EndpointSlices and TLS Secrets, and routes each request by
host and path (networking.k8s.io/v1 rules) straight to a ready pod of the backend,
never through the ClusterIP. Changes swap an immutable routing table and endpoint
sets; listeners never restart. HTTPS certificates are chosen by SNI from the
Ingresses' spec.tls Secrets. /metrics, /healthz and /readyz are on --metrics-address.

svcnet ingress convert prints the Gateway API objects that do what ingress-nginx's
Ingresses do.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return controller.Run(cmd.Context(), o)
		},
	}
	o.AddFlags(cmd.Flags())
	cmd.AddCommand(newIngressConvertCommand())
	return cmd
}
