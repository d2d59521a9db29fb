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
	o.AddFlags(cmd.Flags())
	return cmd
}
