package main

import (
	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/dns/nodecache"
)

func newNodeCacheCommand() *cobra.Command {
	o := nodecache.Defaults()
	cmd := &cobra.Command{
		Use:   "node-cache",
		Short: "Run a node-local DNS cache in front of the cluster DNS (NodeLocal DNSCache)",
		Long: `Serve DNS on a link-local address of the node (169.254.20.10:53 by default) that
pods' resolv.conf names, answering from a cache and asking the cluster DNS's
replicas directly at their endpoints over TCP, with failover from one replica to the
next: a replica's death costs no lookup, and pods' UDP queries skip conntrack
(NOTRACK rules). Every name goes to the cluster DNS, which forwards outside names.
Runs in the node's network namespace as root (it puts its address on lo and adds
the raw-table rules there); svcnet up starts one per node (unless --node-local-dns=false).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return nodecache.Run(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the API server (required; reads one Service and its EndpointSlices)")
	f.StringVar(&o.Listen, "listen", o.Listen, "address pods query, UDP and TCP (IP:PORT)")
	f.StringVar(&o.Service, "service", o.Service, "the cluster DNS Service (NAMESPACE/NAME) whose replicas are asked")
	f.StringVar(&o.ClusterDNS, "cluster-dns", o.ClusterDNS, "the cluster DNS Service's ClusterIP, asked until its endpoints are known and when none is usable (required)")
	f.BoolVar(&o.SetupAddress, "setup-address", o.SetupAddress, "put the --listen address on lo and add the NOTRACK rules for it")
	f.StringVar(&o.IPTablesBinary, "iptables-binary", o.IPTablesBinary, "iptables command of the NOTRACK rules (the node's own)")
	f.DurationVar(&o.Timeout, "upstream-timeout", o.Timeout, "how long one replica may take to answer before the next is asked")
	f.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "address of /metrics and /healthz (0 to disable)")
	f.BoolVar(&o.QueryLog, "query-log", o.QueryLog, "log every query (one line each)")
	return cmd
}
