package convertcmd

import (
	"github.com/spf13/pflag"

	"github.com/svcnet/svcnet/internal/cliflags"
)

// AddFlags adds `svcnet ingress convert`'s flags for o to f; the
// source's flags are kubectl's.
func (o *Options) AddFlags(f *pflag.FlagSet) {
	f.StringArrayVarP(&o.Files, "filename", "f", o.Files, "a file of Ingresses, YAML or JSON, one or many documents, Lists too (- for stdin), with the Services whose named ports they use; repeatable")
	f.BoolVar(&o.FromCluster, "from-cluster", o.FromCluster, "read the Ingresses, and their Services, from the cluster")
	f.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the cluster, with --from-cluster (default: in-cluster credentials)")
	f.StringVarP(&o.Namespace, "namespace", "n", o.Namespace, "the namespace read from the cluster (default: the kubeconfig context's); with -f, that of objects that name none (default: default)")
	f.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", o.AllNamespaces, "read the Ingresses of every namespace of the cluster")
	f.StringVar(&o.GatewayClass, "gateway-class", o.GatewayClass, "spec.gatewayClassName of the Gateway")
	f.StringVar(&o.GatewayName, "gateway-name", o.GatewayName, "name of the Gateway")
	f.StringVar(&o.GatewayNamespace, "gateway-namespace", o.GatewayNamespace, "namespace of the Gateway (default: the Ingresses', when they share one)")
}

// Args is the command line of `svcnet ingress convert` with o: the flags
// whose values differ from the defaults.
func (o Options) Args() []string { return cliflags.Args(o, Defaults, (*Options).AddFlags) }
