package controllermanager

import (
	"github.com/spf13/pflag"

	"github.com/svcnet/svcnet/internal/cliflags"
)

// AddFlags adds `svcnet controller-manager`'s flags for o to f.
func (o *Options) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the API server")
	f.StringSliceVar(&o.Controllers, "controllers", o.Controllers, "controllers to run: * for all, a name to add, -name to leave out")
	f.IntVar(&o.Workers, "concurrent-syncs", o.Workers, "workers per controller")
	f.IntVar(&o.MaxEndpointsPerSlice, "max-endpoints-per-slice", o.MaxEndpointsPerSlice, "most endpoints in one EndpointSlice")
	f.StringVar(&o.LoadBalancerPool, "load-balancer-pool", o.LoadBalancerPool, "addresses for LoadBalancer services: FIRST-LAST or CIDR, comma separated")
	f.StringVar(&o.LoadBalancerClass, "load-balancer-class", o.LoadBalancerClass, "loadBalancerClass to serve (default: services without a class)")
	f.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "address of /healthz and /metrics (0 to disable)")
	f.DurationVar(&o.NodeMonitorGracePeriod, "node-monitor-grace-period", o.NodeMonitorGracePeriod, "how long a node may post neither a Lease renewal nor a status before it is marked Unknown and its pods not ready")
	f.DurationVar(&o.NodeMonitorPeriod, "node-monitor-period", o.NodeMonitorPeriod, "how often the node lifecycle controller checks nodes")
	f.DurationVar(&o.PodGCPeriod, "pod-gc-period", o.PodGCPeriod, "how often the pod garbage collector looks for pods of deleted nodes (svcnet's; Kubernetes has it fixed at 20s)")
	f.DurationVar(&o.OrphanPodQuarantine, "orphan-pod-quarantine", o.OrphanPodQuarantine, "how long a pod's node must be gone before the pod is deleted (svcnet's; Kubernetes has it fixed at 40s)")
	f.IntVar(&o.TerminatedPodGCThreshold, "terminated-pod-gc-threshold", o.TerminatedPodGCThreshold, "terminated pods that may exist before the oldest are deleted (0 or less: never)")
	f.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "elect a leader through a Lease so that only one replica acts")
	f.StringVar(&o.LeaseNamespace, "leader-elect-resource-namespace", o.LeaseNamespace, "namespace of the leader Lease")
	f.StringVar(&o.LeaseName, "leader-elect-resource-name", o.LeaseName, "name of the leader Lease")
	f.StringVar(&o.Identity, "leader-elect-identity", o.Identity, "this replica's identity in the Lease")
	f.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "how long a lease holds without renewal")
	f.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "how long the leader retries renewing before it gives up")
	f.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "how often to try to acquire or renew")
}

// Args is the command line of `svcnet controller-manager` with o: the flags whose values
// differ from the defaults.
func (o Options) Args() []string { return cliflags.Args(o, Defaults, (*Options).AddFlags) }
