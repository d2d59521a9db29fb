package nodecache

import (
	"github.com/spf13/pflag"

	"github.com/svcnet/svcnet/internal/cliflags"
)

// AddFlags adds `svcnet node-cache`'s flags for o to f.
func (o *Options) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the API server (required; reads one Service and its EndpointSlices)")
	f.StringVar(&o.Listen, "listen", o.Listen, "address pods query, UDP and TCP (IP:PORT)")
	f.StringVar(&o.Service, "service", o.Service, "the cluster DNS Service (NAMESPACE/NAME) whose replicas are asked")
	f.StringVar(&o.ClusterDNS, "cluster-dns", o.ClusterDNS, "the cluster DNS Service's ClusterIP, asked until its endpoints are known and when none is usable (required)")
	f.BoolVar(&o.SetupAddress, "setup-address", o.SetupAddress, "put the --listen address on lo and add the NOTRACK rules for it")
	f.StringVar(&o.IPTablesBinary, "iptables-binary", o.IPTablesBinary, "iptables command of the NOTRACK rules (the node's own)")
	f.DurationVar(&o.Timeout, "upstream-timeout", o.Timeout, "how long one replica may take to answer before the next is asked")
	f.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "address of /metrics and /healthz (0 to disable)")
	f.BoolVar(&o.QueryLog, "query-log", o.QueryLog, "log every query (one line each)")
}

// Args is the command line of `svcnet node-cache` with o: the flags whose values
// differ from the defaults.
func (o Options) Args() []string { return cliflags.Args(o, Defaults, (*Options).AddFlags) }
