package main

import (
	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/ingress/convertcmd"
)

func newIngressConvertCommand() *cobra.Command {
	o := convertcmd.Defaults()
	cmd := &cobra.Command{
		Use:   "convert (-f FILE ... | --from-cluster [-n NAMESPACE | -A])",
		Short: "Print the Gateway API objects that route as ingress-nginx routes the Ingresses",
		Long: `The migration from ingress-nginx to the Gateway API: read Ingresses (from files, YAML
or JSON, - for stdin; or from the cluster) and print on stdout, as YAML for kubectl apply,
one Gateway (class --gateway-class) with an HTTP listener on port 80 and an HTTPS listener
on 443 per TLS host, with its Secret; ReferenceGrants for the Secrets of other namespaces
than the Gateway's; and an HTTPRoute per Ingress, in its namespace and with its name
(several when its hosts have different paths). Canary Ingresses become weighted
backendRefs and header matches of their primary's routes.

ingress-nginx annotations with a Gateway API equivalent are carried over: ssl-redirect and
force-ssl-redirect (a 308 to https from the HTTP listener), rewrite-target (URLRewrite:
a plain prefix strip or replacement of a regular expression, or the whole path), canary,
canary-weight(-total) and canary-by-header(-value), proxy-connect/read/send-timeout (the
rules' timeouts), enable-cors and cors-* (the CORS filter), backend-protocol GRPC and H2C
(the Services' ports then need appProtocol kubernetes.io/h2c). Every other annotation,
and every path, backend or TLS entry that cannot be converted, is named in the comment
block at the top of the output and on stderr ("not carried over: <annotation> on
<namespace>/<name>: <why>", "left out: …"), as are conversions that behave differently
("note: …"). Named Service ports are resolved from the Services in the files or the
cluster: the Gateway API takes port numbers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return convertcmd.Run(cmd.Context(), o, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
