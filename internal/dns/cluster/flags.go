package cluster

import (
	"github.com/spf13/pflag"

	"github.com/svcnet/svcnet/internal/cliflags"
)

// AddFlags adds `svcnet dns`'s flags for o to f.
func (o *Options) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the API server (required)")
	f.StringVar(&o.Listen, "listen", o.Listen, "address to serve DNS on, UDP and TCP (ADDRESS:PORT)")
	f.StringVar(&o.Zone, "zone", o.Zone, "cluster domain")
	f.StringSliceVar(&o.Upstreams, "upstream", o.Upstreams, "upstream DNS servers, IP or IP:PORT, comma separated, tried in order (default: the nameservers of --resolv-conf; none: forward nothing, refuse outside names)")
	f.StringVar(&o.ResolvConf, "resolv-conf", o.ResolvConf, "resolv.conf giving the upstreams when --upstream is not set, and the node's search list for --autopath")
	f.StringVar(&o.Pods, "pods", o.Pods, "pod records a-b-c-d.<ns>.pod.<zone>: disabled, insecure (any address) or verified (only addresses of pods in that namespace)")
	f.IntVar(&o.TTL, "ttl", o.TTL, "TTL of cluster answers and of their denials, in seconds (1-3600)")
	f.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "address of /metrics (0 to disable)")
	f.BoolVar(&o.Profiling, "profiling", o.Profiling, "also serve /debug/pprof on the metrics address")
	f.StringVar(&o.HealthBindAddress, "health-bind-address", o.HealthBindAddress, "address of /healthz and /readyz (0 to disable; may equal --metrics-bind-address)")
	f.BoolVar(&o.QueryLog, "query-log", o.QueryLog, "log every query (one line each)")
	f.StringSliceVar(&o.ServiceCIDRs, "service-cidr", o.ServiceCIDRs, "service CIDRs, comma separated: PTR questions in them are answered here, never forwarded")
	f.StringSliceVar(&o.PodCIDRs, "pod-cidr", o.PodCIDRs, "pod CIDRs, comma separated: PTR questions in them are answered here, never forwarded")
	f.StringArrayVar(&o.Forward, "forward", o.Forward, "stub domain ZONE=SERVER[,SERVER]: names in ZONE go to its servers (IP or IP:PORT, tried in order), with a cache and failover of their own; repeat for more zones")
	f.StringVar(&o.ConfigMap, "configmap", o.ConfigMap, "NAMESPACE/NAME of a ConfigMap read as kube-dns reads its own: stubDomains (JSON zone to servers) beside --forward, upstreamNameservers (JSON list) in place of the upstreams; followed without a restart (empty: none)")
	f.BoolVar(&o.Autopath, "autopath", o.Autopath, "answer the search-path expansions of outside names on the server for pods whose namespace is known from their IP (watches Pods)")
}

// Args is the command line of `svcnet dns` with o: the flags whose values
// differ from the defaults.
func (o Options) Args() []string { return cliflags.Args(o, Defaults, (*Options).AddFlags) }
