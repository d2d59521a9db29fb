package main

import (
	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/dns/cluster"
)

func newDNSCommand() *cobra.Command {
	o := cluster.Defaults()
	cmd := &cobra.Command{
		Use:   "dns",
		Short: "Serve cluster DNS from Services and EndpointSlices, forward other names upstream",
		Long: `Answer the names of the Kubernetes DNS-based service discovery specification
(schema 1.1.0) for the cluster zone, from Services, EndpointSlices and Pods watched
through the Kubernetes API, as CoreDNS's kubernetes plugin does; every other name
goes to the upstream servers (--upstream, else the nameservers of --resolv-conf)
through a cache with health-checked failover, or, for names of a stub domain
(--forward, or kube-dns's ConfigMap), to that domain's own servers. The zone has no cache: each change
swaps in a new snapshot, and cluster names keep resolving when every upstream is
down. The nameserver record names the ClusterIPs of kube-system/kube-dns.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cluster.Run(cmd.Context(), o)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
